// Compiled PCRE2 pattern (UTF + UCP, JIT when available) for the Split pre-tokenizer, plus the
// translation of Hugging Face tokenizer.json patterns into PCRE2 syntax.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dspark::tokenizer {

// [start, end) byte offsets of one match
using Span = std::pair<size_t, size_t>;

// Rewrites a tokenizer.json regex so that PCRE2 matches what the reference Hugging Face
// JavaScript tokenizer (which produced our fixtures) matches:
//  - \s and \S use JavaScript's whitespace set (no U+0085 or U+180E, plus U+FEFF); \d and \w
//    are ASCII-only, as in JavaScript regexes;
//  - (?i:...) groups fold ASCII letters only ([sS]), as the JS port rewrites them; PCRE2's Unicode
//    folding would also let "'ſ" match "'s";
//  - \uXXXX becomes \x{XXXX}.
// Inline flag settings other than (?i:...) are rejected with dspark::Error.
std::string to_pcre2_pattern(std::string_view hf_pattern);

class Regex {
 public:
  // `pattern` is PCRE2 syntax; `literal` matches it as a plain string instead.
  Regex(std::string_view pattern, bool literal);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Walks the non-empty, non-overlapping matches in `text` (valid UTF-8), left to right, without
  // collecting them: encoding streams each piece straight into BPE.
  class Cursor {
   public:
    Cursor(const Regex& regex, std::string_view text);
    ~Cursor();
    Cursor(const Cursor&) = delete;
    Cursor& operator=(const Cursor&) = delete;

    // The next match, or nullopt at the end.
    std::optional<Span> next();

   private:
    const Regex& regex_;
    std::string_view text_;
    void* match_data_;  // pcre2_match_data_8*
    size_t offset_ = 0;
    uint32_t options_;
  };

  // All matches of `text` (for tests and tools; encoding uses Cursor).
  std::vector<Span> find_all(std::string_view text) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so PCRE2 stays out of the header
};

}  // namespace dspark::tokenizer
