#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>

#include "common/error.h"

namespace dspark::tokenizer {
namespace {

// How far the bytes at `pos` follow a well-formed UTF-8 sequence (Unicode Table 3-7).
struct SequenceCheck {
  size_t n_valid;     // bytes that are a valid prefix of a sequence (0: invalid lead byte)
  size_t n_expected;  // length the lead byte announces
};

SequenceCheck check_sequence(std::string_view s, size_t pos) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  if (lead < 0x80) return {1, 1};
  size_t expected = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte; later bytes are always 80..BF
  if (lead >= 0xC2 && lead <= 0xDF) {
    expected = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    expected = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    expected = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {0, 1};
  }
  size_t n = 1;
  while (n < expected && pos + n < s.size()) {
    const auto b = static_cast<uint8_t>(s[pos + n]);
    if (b < lo || b > hi) break;
    lo = 0x80;
    hi = 0xBF;
    ++n;
  }
  return {n, expected};
}

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Lead bytes below 0xCC start code points below U+0300: no such character decomposes into
// something NFC would change, and none composes with the character before it.
bool starts_low_code_point(uint8_t b) { return b < 0xCC && !is_continuation(b); }

void append_nfc_of_span(std::string& out, std::string_view span) {
  utf8proc_uint8_t* normalized = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(span.data()), static_cast<utf8proc_ssize_t>(span.size()),
                   &normalized, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) throw Error(std::string("NFC normalisation failed: ") + utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(normalized), static_cast<size_t>(n));
  std::free(normalized);
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const SequenceCheck check = check_sequence(text, pos);
    if (check.n_valid != check.n_expected) return pos;
    pos += check.n_valid;
  }
  return std::nullopt;
}

char32_t next_code_point(std::string_view text, size_t& pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  const size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
  char32_t cp = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + i]) & 0x3F);
  pos += length;
  return cp;
}

char32_t previous_code_point(std::string_view text, size_t& end) {
  size_t start = end - 1;
  while (start > 0 && is_continuation(static_cast<uint8_t>(text[start]))) --start;
  size_t pos = start;
  const char32_t cp = next_code_point(text, pos);
  end = start;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string nfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;  // text[0, copied) is already in `out`
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0xCC) {
      ++pos;
      continue;
    }
    // A stretch of code points >= U+0300, plus the low starter before it, which may compose
    // with them. It ends before the next low code point, which nothing crosses.
    size_t span_start = pos;
    if (span_start > copied) previous_code_point(text, span_start);
    size_t span_end = pos + 1;
    while (span_end < text.size() && !starts_low_code_point(static_cast<uint8_t>(text[span_end]))) ++span_end;
    out.append(text.substr(copied, span_start - copied));
    append_nfc_of_span(out, text.substr(span_start, span_end - span_start));
    copied = pos = span_end;
  }
  out.append(text.substr(copied));
  return out;
}

bool may_change_under_nfc(std::string_view text) {
  for (const char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) return true;
  }
  return false;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const size_t pos = n - back;
    if (is_continuation(static_cast<uint8_t>(bytes[pos]))) continue;
    const SequenceCheck check = check_sequence(bytes, pos);
    const bool unfinished = check.n_valid > 0 && check.n_valid < check.n_expected && pos + check.n_valid == n;
    return unfinished ? pos : n;
  }
  return n;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const SequenceCheck check = check_sequence(bytes, pos);
    if (check.n_valid == check.n_expected) {
      out.append(bytes.substr(pos, check.n_valid));
      pos += check.n_valid;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD for the maximal invalid subpart
      pos += check.n_valid == 0 ? 1 : check.n_valid;
    }
  }
  return out;
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_word_character(char32_t c) {
  if (c == '_' || c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

}  // namespace dspark::tokenizer
