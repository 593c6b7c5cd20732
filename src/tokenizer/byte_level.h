// GPT-2's byte-level alphabet: every byte 0..255 is shown as one printable code point, so that
// vocabularies of byte strings can be stored as JSON text ("Ġ" is the space byte 0x20).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace dspark::tokenizer {

// The code point that stands for `byte` in byte-level vocabularies.
char32_t byte_to_alphabet(unsigned char byte);

// The bytes a byte-level token string stands for; nullopt when a character is outside the alphabet
// (Hugging Face's ByteLevel decoder then keeps the token's own UTF-8, see token_bytes_for_decoding).
std::optional<std::string> alphabet_to_bytes(std::string_view token);

// The bytes a token contributes to decoded text under the ByteLevel decoder.
std::string token_bytes_for_decoding(std::string_view token);

// Byte-level spelling of raw bytes (inverse of alphabet_to_bytes).
std::string bytes_to_alphabet(std::string_view bytes);

}  // namespace dspark::tokenizer
