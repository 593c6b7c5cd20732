// Internal to softmax_row: the algorithm every ISA variant shares, on a SIMD policy V (simd_*.h).
#pragma once
#include <cstdint>
#include <limits>

namespace dspark::kernels::softmax_row_detail {

using SoftmaxRowKernel = void (*)(const float* x, int64_t n, float* out);
void softmax_row_generic(const float* x, int64_t n, float* out);
void softmax_row_avx2(const float* x, int64_t n, float* out);
void softmax_row_avx512(const float* x, int64_t n, float* out);

// The tail (n not a multiple of the width) is padded with -infinity, which exp maps to exactly 0,
// so every entry goes through the same exp.
template <class V>
void softmax_row(const float* x, int64_t n, float* out) {
  constexpr int64_t W = V::kWidth;
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const int64_t full = n / W * W;
  float tail[W];
  for (int64_t i = 0; i < W; ++i) tail[i] = full + i < n ? x[full + i] : kMasked;

  typename V::Reg max_reg = V::load(tail);
  for (int64_t i = 0; i < full; i += W) max_reg = V::max(max_reg, V::load(x + i));
  const typename V::Reg max = V::broadcast(V::reduce_max(max_reg));

  // The sum goes to f64 every kChunk entries: f32 lanes summing a whole 150k vocabulary would
  // lose ~1e-5 relative.
  constexpr int64_t kChunk = 64 * W;
  const typename V::Reg tail_exp = V::exp(V::sub(V::load(tail), max));
  V::store(tail, tail_exp);
  double sum = V::reduce_add(tail_exp);
  for (int64_t chunk = 0; chunk < full; chunk += kChunk) {
    typename V::Reg sum_reg = V::zero();
    const int64_t end = chunk + kChunk < full ? chunk + kChunk : full;
    for (int64_t i = chunk; i < end; i += W) {
      const typename V::Reg e = V::exp(V::sub(V::load(x + i), max));
      V::store(out + i, e);
      sum_reg = V::add(sum_reg, e);
    }
    sum += V::reduce_add(sum_reg);
  }
  const typename V::Reg inv = V::broadcast(static_cast<float>(1.0 / sum));
  for (int64_t i = 0; i < full; i += W) V::store(out + i, V::mul(V::load(out + i), inv));
  V::store(tail, V::mul(V::load(tail), inv));
  for (int64_t i = full; i < n; ++i) out[i] = tail[i - full];
}

}  // namespace dspark::kernels::softmax_row_detail
