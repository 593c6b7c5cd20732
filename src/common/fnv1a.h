// FNV-1a, 64-bit: the hash behind the corpus's and the drafter data's deterministic splits and
// the feature cache's fingerprints. `h` continues an earlier hash, so a file hashes in chunks.
#pragma once
#include <cstdint>
#include <string_view>

namespace dspark {

inline constexpr uint64_t kFnv1aOffset = 0xCBF29CE484222325ull;

inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (const unsigned char c : bytes) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace dspark
