// linear_small with AVX2 + FMA: f32 weights, and bf16 or f16 (F16C's vcvtph2ps) weights widened
// to f32 in registers.
// 16 ymm registers allow smaller tiles than AVX-512: up to 4 rows of x times 2-4 weight rows.
// See linear_small_variants.h for why everything here is file-local.
#include <immintrin.h>

#include "model/kernels/bf16.h"
#include "model/kernels/linear_small_variants.h"

namespace dspark::kernels::linear_small_detail {
namespace {

constexpr int kLanes = 8;

float horizontal_sum(__m256 v) {
  const __m128 pairs = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 halves = _mm_add_ps(pairs, _mm_movehl_ps(pairs, pairs));
  return _mm_cvtss_f32(_mm_add_ss(halves, _mm_movehdup_ps(halves)));
}

// How weights are stored and widened (exactly) to f32: 8 at a time (vector) or one (scalar).
struct F32Weights {
  using Elem = float;
  static float scalar(const float* w) { return *w; }
  static __m256 vector(const float* w) { return _mm256_loadu_ps(w); }
};
// bf16 is the top half of an f32, so widening is exact: zero-extend to 32 bits, shift left 16.
struct Bf16Weights {
  using Elem = uint16_t;
  static float scalar(const uint16_t* w) { return bf16_to_f32(*w); }
  static __m256 vector(const uint16_t* w) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
};
// Every f16 value (subnormals included) is an f32 value; vcvtph2ps converts exactly.
struct F16Weights {
  using Elem = uint16_t;
  static float scalar(const uint16_t* w) { return _cvtsh_ss(*w); }
  static __m256 vector(const uint16_t* w) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  }
};

// y[j, r] = x[j, :] . w[r, :] for MR rows of x and NR weight rows; the k % 8 tail is scalar.
template <class Weights, int MR, int NR>
void dot_tile(const float* x,                   // [MR, k]
              const typename Weights::Elem* w,  // [NR, k]
              int64_t k,
              float* y,  // [MR, y_stride]
              int64_t y_stride, bool accumulate) {
  __m256 acc[MR][NR];
#pragma GCC unroll 4
  for (int j = 0; j < MR; ++j) {
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) acc[j][r] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    __m256 wv[NR];
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) wv[r] = Weights::vector(w + r * k + i);
#pragma GCC unroll 4
    for (int j = 0; j < MR; ++j) {
      const __m256 xv = _mm256_loadu_ps(x + j * k + i);
#pragma GCC unroll 4
      for (int r = 0; r < NR; ++r) acc[j][r] = _mm256_fmadd_ps(wv[r], xv, acc[j][r]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < MR; ++j) {
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      float sum = horizontal_sum(acc[j][r]);
      for (int64_t t = i; t < k; ++t) sum += x[j * k + t] * Weights::scalar(w + r * k + t);
      y[j * y_stride + r] = accumulate ? y[j * y_stride + r] + sum : sum;
    }
  }
}

// Tiles for for_each_tile: blocks of 4 weight rows, up to 4 rows of x per tile.
template <class Weights>
struct Avx2Tiles {
  static constexpr int kColumns = 4;
  static constexpr int kMaxRows = 4;

  static constexpr int weight_rows_per_tile(int x_rows) { return x_rows <= 2 ? 4 : 2; }

  template <int MR>
  static void tile_rows(const Problem& p, int64_t row, int64_t col, int cols) {
    constexpr int NR = weight_rows_per_tile(MR);
    const float* x = p.x + row * p.k;
    const auto* w = static_cast<const typename Weights::Elem*>(p.w) + col * p.k;
    float* y = p.y + row * p.ldy + col;
    int c = 0;
    for (; c + NR <= cols; c += NR) dot_tile<Weights, MR, NR>(x, w + c * p.k, p.k, y + c, p.ldy, p.accumulate);
    for (; c < cols; ++c) dot_tile<Weights, MR, 1>(x, w + c * p.k, p.k, y + c, p.ldy, p.accumulate);
  }

  static void tile(const Problem& p, int64_t row, int rows, int64_t col, int cols) {
    switch (rows) {
      case 1: return tile_rows<1>(p, row, col, cols);
      case 2: return tile_rows<2>(p, row, col, cols);
      case 3: return tile_rows<3>(p, row, col, cols);
      default: return tile_rows<4>(p, row, col, cols);
    }
  }
};

}  // namespace

void columns_avx2(const Problem& p, int64_t n_begin, int64_t n_end) {
  switch (p.w_dtype) {
    case WeightDType::kF32: return for_each_tile<Avx2Tiles<F32Weights>>(p, n_begin, n_end);
    case WeightDType::kBF16: return for_each_tile<Avx2Tiles<Bf16Weights>>(p, n_begin, n_end);
    case WeightDType::kF16: return for_each_tile<Avx2Tiles<F16Weights>>(p, n_begin, n_end);
  }
}

}  // namespace dspark::kernels::linear_small_detail
