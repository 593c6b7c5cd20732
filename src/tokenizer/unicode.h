// UTF-8 and Unicode helpers for the tokenizer: validation, NFC, lossy decoding of byte strings and
// the whitespace / word-character predicates that added-token matching needs.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dspark::tokenizer {

// Offset of the first byte that is not part of a well-formed UTF-8 sequence, or nullopt when the
// whole text is valid. Overlong forms, surrogates and code points above U+10FFFF are invalid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// Decodes the code point starting at text[pos] (text must be valid UTF-8) and advances pos.
char32_t next_code_point(std::string_view text, size_t& pos);

// Decodes the code point that ends just before text[end] (valid UTF-8) and moves end to its start.
char32_t previous_code_point(std::string_view text, size_t& end);

void append_utf8(std::string& out, char32_t code_point);

// Unicode NFC of valid UTF-8 text. Only the stretches around code points >= U+0300 are handed to
// utf8proc: everything below U+0300 is a stable starter, so ASCII-heavy text costs one scan.
std::string nfc(std::string_view text);

// False when `text` has no code point >= U+0300, so that nfc(text) == text without a copy.
bool may_change_under_nfc(std::string_view text);

// Length of the longest prefix of `bytes` that does not end inside an unfinished UTF-8 sequence:
// bytes past it could still become a valid character once more bytes arrive.
size_t complete_utf8_prefix(std::string_view bytes);

// Converts arbitrary bytes to valid UTF-8, replacing each maximal invalid subpart with U+FFFD, the
// WHATWG/Unicode rule used by TextDecoder and Rust's from_utf8_lossy.
std::string utf8_lossy(std::string_view bytes);

// Rust's char::is_whitespace (the Unicode White_Space property), used for lstrip/rstrip.
bool is_white_space(char32_t c);

// Alphanumeric or '_', the word-character test of single_word added tokens.
bool is_word_character(char32_t c);

}  // namespace dspark::tokenizer
