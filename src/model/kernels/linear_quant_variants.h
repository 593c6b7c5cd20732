// Internal to linear_quant: what its per-ISA variants share. Each variant lives in a file compiled
// with its ISA flags (CMakeLists.txt); linear_quant.cpp picks one at run time. As in
// linear_small_variants.h, helpers in the ISA files stay in anonymous namespaces.
#pragma once
#include <cstdint>

#include "model/kernels/linear_quant.h"

namespace dspark::kernels::linear_quant_detail {

// One call with its activations already quantized (linear_quant.h). Per row i of x and block b:
//   xq[i * k + b * 32 + t]  the 32 int8 values (read as 8 int32 words by the SIMD variants)
//   xd[i * blocks + b]      their scale
//   xbias[i * blocks + b]   -(weight offset) * sum_t xq: -128 x sum for Q8_0, whose packed values
//                           are q + 128, and -8 x sum for Q4_0, whose nibbles are q + 8; so a
//                           block's integer sum starts from xbias and adds the unsigned products.
struct Problem {
  const int8_t* xq;
  const float* xd;
  const int32_t* xbias;
  int64_t m, k, blocks;
  const uint8_t* w;  // packed, n rounded up to whole groups
  QuantType type;
  int64_t n;
  float* y;  // [m, ldy]
  int64_t ldy;
  bool accumulate;
  // The VNNI variant's activations instead, block-major: block b of row i at
  // xq_by_block[(b * m + i) * 32], its scale and bias at [b * m + i]. The rows of one block then
  // sit at constant offsets from one pointer, which its dot products read as broadcast memory
  // operands (no register per row). Each variant gets one layout; the other's pointers are null.
  const int8_t* xq_by_block = nullptr;
  const float* xd_by_block = nullptr;
  const int32_t* xbias_by_block = nullptr;
};

// Bytes of one block of one 16-row group: 16 f16 scales, then the values in 64-byte sub-groups
// (Q8_0: 8, one per 4 values; Q4_0: 4, each 4 bytes of packed nibbles per row).
constexpr int64_t kScaleBytes = 2 * kQuantGroupRows;
constexpr int64_t kSubGroupBytes = 4 * kQuantGroupRows;
inline int64_t sub_groups(QuantType type) { return type == QuantType::kQ8_0 ? 8 : 4; }
inline int64_t group_block_bytes(QuantType type) { return kScaleBytes + sub_groups(type) * kSubGroupBytes; }

// x's blocks of 32 (rows one after another) quantized as llama.cpp's quantize_row_q8_0 does: per
// block d = max|x| / 127, q = round(x / d) with halves away from zero (roundf), d kept as f16 (the
// rounding of the scale moves later q's rounding decisions, so keeping llama.cpp's f16 scale is what
// makes a quantized file's logits equal llama.cpp's); xbias = -offset * sum q (Problem). Block i
// of the call is written `stride` blocks apart (xq + i * stride * 32, xd[i * stride],
// xbias[i * stride]): 1 for row-major, m to write one row of a block-major layout. Both variants
// give the same bytes and bits.
using QuantizeKernel = void (*)(const float* x, int64_t n_blocks, int32_t offset, int64_t stride, int8_t* xq,
                                float* xd, int32_t* xbias);
void quantize_generic(const float* x, int64_t n_blocks, int32_t offset, int64_t stride, int8_t* xq, float* xd,
                      int32_t* xbias);
void quantize_avx512(const float* x, int64_t n_blocks, int32_t offset, int64_t stride, int8_t* xq, float* xd,
                     int32_t* xbias);

// Each computes y[:, 16 g_begin : min(n, 16 g_end)) for all m rows.
using GroupsKernel = void (*)(const Problem& p, int64_t g_begin, int64_t g_end);
void groups_generic(const Problem& p, int64_t g_begin, int64_t g_end);
void groups_avx2(const Problem& p, int64_t g_begin, int64_t g_end);
void groups_avx512vnni(const Problem& p, int64_t g_begin, int64_t g_end);
void groups_amx(const Problem& p, int64_t g_begin, int64_t g_end);

}  // namespace dspark::kernels::linear_quant_detail
