#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <optional>

#include "common/error.h"

namespace dspark::tokenizer {
namespace {

// JavaScript's \s: WhiteSpace and LineTerminator code points.
constexpr std::string_view kJsWhiteSpace =
    "\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}\\x{FEFF}";

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char other_case(char c) { return static_cast<char>(c ^ 0x20); }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Replacement for a class shorthand such as \s, inside or outside a [...] class; nullopt keeps the
// escape as written (negated shorthands inside a class keep PCRE2's meaning).
std::optional<std::string> shorthand_replacement(char escape, bool in_class) {
  std::string members;
  bool negated = false;
  switch (escape) {
    case 's':
      members = kJsWhiteSpace;
      break;
    case 'S':
      members = kJsWhiteSpace;
      negated = true;
      break;
    case 'd':
      members = "0-9";
      break;
    case 'D':
      members = "0-9";
      negated = true;
      break;
    case 'w':
      members = "A-Za-z0-9_";
      break;
    case 'W':
      members = "A-Za-z0-9_";
      negated = true;
      break;
    default:
      return std::nullopt;
  }
  if (in_class) return negated ? std::nullopt : std::optional<std::string>(members);
  return (negated ? "[^" : "[") + members + "]";
}

class PatternTranslator {
 public:
  explicit PatternTranslator(std::string_view pattern) : p_(pattern) {}

  std::string run() {
    while (i_ < p_.size()) {
      if (p_[i_] == '\\' && i_ + 1 < p_.size()) {
        escape();
      } else if (in_class_) {
        class_char();
      } else {
        plain_char();
      }
    }
    return out_;
  }

 private:
  void escape() {
    const char e = p_[i_ + 1];
    if (auto replacement = shorthand_replacement(e, in_class_)) {
      out_ += *replacement;
      i_ += 2;
    } else if (e == 'u' && i_ + 6 <= p_.size() && is_hex(p_[i_ + 2]) && is_hex(p_[i_ + 3]) && is_hex(p_[i_ + 4]) &&
               is_hex(p_[i_ + 5])) {
      out_ += "\\x{" + std::string(p_.substr(i_ + 2, 4)) + "}";
      i_ += 6;
    } else {
      out_ += p_.substr(i_, 2);
      i_ += 2;
    }
  }

  void class_char() {
    const char c = p_[i_];
    if (c == ']' && i_ > class_body_start_) {
      in_class_ = false;
      out_ += c;
      ++i_;
    } else if (caseless_ && is_ascii_letter(c)) {
      class_letter();
    } else {
      out_ += c;
      ++i_;
    }
  }

  // A letter (or letter range a-z) inside a class of a caseless group: add the other case too.
  void class_letter() {
    const char first = p_[i_];
    if (i_ + 2 < p_.size() && p_[i_ + 1] == '-' && is_ascii_letter(p_[i_ + 2])) {
      const char last = p_[i_ + 2];
      out_ += {first, '-', last, other_case(first), '-', other_case(last)};
      i_ += 3;
    } else {
      out_ += {first, other_case(first)};
      ++i_;
    }
  }

  void plain_char() {
    const char c = p_[i_];
    if (c == '[') {
      open_class();
    } else if (c == '(') {
      open_group();
    } else if (c == ')') {
      if (!group_caseless_.empty()) {
        caseless_ = group_caseless_.back();
        group_caseless_.pop_back();
      }
      out_ += c;
      ++i_;
    } else if (caseless_ && is_ascii_letter(c)) {
      out_ += {'[', c, other_case(c), ']'};
      ++i_;
    } else {
      out_ += c;
      ++i_;
    }
  }

  void open_class() {
    in_class_ = true;
    out_ += '[';
    ++i_;
    if (i_ < p_.size() && p_[i_] == '^') {
      out_ += '^';
      ++i_;
    }
    class_body_start_ = i_ + 1;  // a ']' right after '[' or '[^' is a literal member
  }

  void open_group() {
    group_caseless_.push_back(caseless_);
    const std::string_view rest = p_.substr(i_);
    if (rest.starts_with("(?i:")) {
      caseless_ = true;
      out_ += "(?:";
      i_ += 4;
      return;
    }
    const bool other_construct = rest.starts_with("(?:") || rest.starts_with("(?=") || rest.starts_with("(?!") ||
                                 rest.starts_with("(?<") || rest.starts_with("(?P<") || !rest.starts_with("(?");
    if (!other_construct) {
      throw Error("unsupported inline flags in pre-tokenizer regex: " + std::string(p_));
    }
    out_ += '(';
    ++i_;
  }

  std::string_view p_;
  std::string out_;
  size_t i_ = 0;
  bool in_class_ = false;
  size_t class_body_start_ = 0;
  bool caseless_ = false;
  std::vector<bool> group_caseless_;  // caseless state to restore at each ')'
};

pcre2_code* as_code(void* code) { return static_cast<pcre2_code*>(code); }

std::string pcre2_message(int error_code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

std::string to_pcre2_pattern(std::string_view hf_pattern) { return PatternTranslator(hf_pattern).run(); }

Regex::Regex(std::string_view pattern, bool literal) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  // PCRE2 refuses UCP together with LITERAL; a literal needs no character classes anyway.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    throw Error("cannot compile pre-tokenizer regex at offset " + std::to_string(error_offset) + " (" +
                pcre2_message(error_code) + "): " + std::string(pattern));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: pcre2_match falls back to the interpreter
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(as_code(code_)); }

Regex::Regex(Regex&& other) noexcept : code_(other.code_) { other.code_ = nullptr; }

Regex& Regex::operator=(Regex&& other) noexcept {
  std::swap(code_, other.code_);
  return *this;
}

Regex::Cursor::Cursor(const Regex& regex, std::string_view text)
    : regex_(regex),
      text_(text),
      match_data_(pcre2_match_data_create_from_pattern(as_code(regex.code_), nullptr)),
      options_(PCRE2_NO_UTF_CHECK) {}  // callers hand us validated UTF-8

Regex::Cursor::~Cursor() { pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_)); }

std::optional<Span> Regex::Cursor::next() {
  auto* data = static_cast<pcre2_match_data*>(match_data_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
  while (offset_ < text_.size()) {
    const int rc = pcre2_match(as_code(regex_.code_), subject, text_.size(), offset_, options_, data, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !(options_ & PCRE2_NO_JIT)) {
      options_ |= PCRE2_NO_JIT;  // a pathological input: the interpreter has no such limit
      continue;
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error("pre-tokenizer regex failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t start = ovector[0], end = ovector[1];
    if (end > start) {
      offset_ = end;
      return Span{start, end};
    }
    // An empty match: step over one whole character and search again.
    offset_ = start + 1;
    while (offset_ < text_.size() && (static_cast<unsigned char>(text_[offset_]) & 0xC0) == 0x80) ++offset_;
  }
  offset_ = text_.size();
  return std::nullopt;
}

std::vector<Span> Regex::find_all(std::string_view text) const {
  std::vector<Span> matches;
  Cursor cursor(*this, text);
  while (auto match = cursor.next()) matches.push_back(*match);
  return matches;
}

}  // namespace dspark::tokenizer
