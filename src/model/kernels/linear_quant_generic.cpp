// linear_quant in portable C++: the reference the SIMD variants reproduce bit for bit (the same
// integer sums, then acc = fma(sum, d_w d_x, acc) block by block).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/kernels/linear_quant_variants.h"
#include "model/safetensors.h"

namespace dspark::kernels::linear_quant_detail {
namespace {

// The unsigned value of lane `lane`, value t (0..31) of one packed group block.
int32_t packed_value(const uint8_t* gb, QuantType type, int64_t lane, int64_t t) {
  if (type == QuantType::kQ8_0) return gb[kScaleBytes + (t / 4) * kSubGroupBytes + lane * 4 + t % 4];
  const int64_t j = t % 16;  // Q4_0: value j in the low nibble of byte j, value j + 16 in its high
  const uint8_t byte = gb[kScaleBytes + (j / 4) * kSubGroupBytes + lane * 4 + j % 4];
  return t < 16 ? byte & 15 : byte >> 4;
}

float quantize_block(const float* x, int8_t* q) {
  float amax = 0;
  for (int64_t t = 0; t < kQuantBlock; ++t) amax = std::max(amax, std::fabs(x[t]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int64_t t = 0; t < kQuantBlock; ++t) {
    // roundf (half away from zero) in integer steps; |r| <= 127.
    const float r = x[t] * id;
    const int32_t toward_zero = static_cast<int32_t>(r);
    const float rest = r - static_cast<float>(toward_zero);  // exact
    q[t] = static_cast<int8_t>(toward_zero + (rest >= 0.5f) - (rest <= -0.5f));
  }
  return model::f16_to_f32(model::f32_to_f16(d));
}

}  // namespace

void quantize_generic(const float* x, int64_t n_blocks, int32_t offset, int64_t stride, int8_t* xq, float* xd,
                      int32_t* xbias) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    int8_t* q = xq + i * stride * kQuantBlock;
    xd[i * stride] = quantize_block(x + i * kQuantBlock, q);
    int32_t sum = 0;
    for (int64_t t = 0; t < kQuantBlock; ++t) sum += q[t];
    xbias[i * stride] = -offset * sum;
  }
}

void groups_generic(const Problem& p, int64_t g_begin, int64_t g_end) {
  const int64_t group_block = group_block_bytes(p.type);
  for (int64_t g = g_begin; g < g_end; ++g)
    for (int64_t lane = 0; lane < kQuantGroupRows; ++lane) {
      const int64_t col = g * kQuantGroupRows + lane;
      if (col >= p.n) break;
      for (int64_t i = 0; i < p.m; ++i) {
        float acc = 0;
        for (int64_t b = 0; b < p.blocks; ++b) {
          const uint8_t* gb = p.w + (g * p.blocks + b) * group_block;
          const int8_t* xq = p.xq + i * p.k + b * kQuantBlock;
          int32_t sum = p.xbias[i * p.blocks + b];
          for (int64_t t = 0; t < kQuantBlock; ++t) sum += packed_value(gb, p.type, lane, t) * xq[t];
          uint16_t d_bits = 0;
          std::memcpy(&d_bits, gb + 2 * lane, 2);
          acc = std::fma(static_cast<float>(sum), model::f16_to_f32(d_bits) * p.xd[i * p.blocks + b], acc);
        }
        float& out = p.y[i * p.ldy + col];
        out = p.accumulate ? out + acc : acc;
      }
    }
}

}  // namespace dspark::kernels::linear_quant_detail
