#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/unicode.h"

namespace dspark::tokenizer {
namespace {

// Printable Latin-1 bytes stand for themselves; the others (controls, space, DEL, NBSP, soft
// hyphen) are numbered from U+0100 upwards in byte order.
bool is_printable_latin1(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> code_point_of_byte{};
  std::array<int16_t, 512> byte_of_code_point{};  // -1 outside the alphabet; all code points < 0x144

  Alphabet() {
    byte_of_code_point.fill(-1);
    char32_t next_extra = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      const char32_t cp = is_printable_latin1(b) ? b : next_extra++;
      code_point_of_byte[b] = cp;
      byte_of_code_point[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;  // immutable after construction
  return table;
}

}  // namespace

char32_t byte_to_alphabet(unsigned char byte) { return alphabet().code_point_of_byte[byte]; }

std::optional<std::string> alphabet_to_bytes(std::string_view token) {
  const Alphabet& table = alphabet();
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const char32_t cp = next_code_point(token, pos);
    if (cp >= table.byte_of_code_point.size() || table.byte_of_code_point[cp] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(table.byte_of_code_point[cp]));
  }
  return bytes;
}

std::string token_bytes_for_decoding(std::string_view token) {
  std::optional<std::string> bytes = alphabet_to_bytes(token);
  return bytes ? std::move(*bytes) : std::string(token);
}

std::string bytes_to_alphabet(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_to_alphabet(b));
  return out;
}

}  // namespace dspark::tokenizer
