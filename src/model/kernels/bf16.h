// Scalar bf16 <-> f32 conversions. bf16 is the upper 16 bits of an IEEE f32.
// `static` on purpose: this header is also included by files compiled with ISA flags, and an
// inline function with external linkage could be merged with an AVX-512 copy by the linker.
#pragma once
#include <cstdint>
#include <cstring>

namespace dspark::kernels {

static inline float bf16_to_f32(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Round to nearest, ties to even (what vcvtneps2bf16 does for finite, normal inputs). NaN stays
// NaN (the quiet bit is forced so rounding cannot turn it into infinity).
static inline uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7FFFu + lsb;
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace dspark::kernels
