// The AVX2 + FMA SIMD policy shared by the kernels' *_avx2.cpp variants (attention_small,
// softmax_row, row_ops): one 8-float register and its operations, including exp. Anonymous
// namespace for the reason given in simd_avx512.h. Include only from files compiled with AVX2
// flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace dspark::kernels {
namespace {

struct Avx2 {
  using Reg = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kMaxRowRegs = 4;  // head_dim <= 32: 4 for q + 8 accumulators
  static constexpr int kAccumulators = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  // 8 bf16 (uint16_t bits) widened exactly: each becomes the upper half of an f32.
  static Reg load_bf16(const uint16_t* p) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg broadcast(float x) { return _mm256_set1_ps(x); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }

  static float reduce_add(Reg v) {
    const __m128 pairs = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 halves = _mm_add_ps(pairs, _mm_movehl_ps(pairs, pairs));
    return _mm_cvtss_f32(_mm_add_ss(halves, _mm_movehdup_ps(halves)));
  }
  static float reduce_max(Reg v) {
    const __m128 pairs = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 halves = _mm_max_ps(pairs, _mm_movehl_ps(pairs, pairs));
    return _mm_cvtss_f32(_mm_max_ss(halves, _mm_movehdup_ps(halves)));
  }

  // Same scheme as the AVX-512 exp: 2^n * Taylor(f), |f| <= ln(2) / 2. Without scalef, 2^n is
  // built in the exponent field, which the clamp to [-87, 88] keeps a normal number.
  // Inputs below -87 (including -infinity) give exactly 0.
  static Reg exp(Reg x) {
    const Reg keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const Reg n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    Reg f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    f = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), f);
    Reg p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    const Reg two_to_n = _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
    return _mm256_and_ps(_mm256_mul_ps(p, two_to_n), keep);
  }

  // Transposing reduction (see the AVX-512 variant): lane i of the result is the sum of acc[i].
  [[gnu::always_inline]] static Reg sum_each(const Reg (&acc)[kWidth]) {
    Reg halves[4];  // [key 2i: 4 partial lanes | key 2i+1: 4 partial lanes]
#pragma GCC unroll 8
    for (int i = 0; i < 4; ++i) {
      halves[i] = _mm256_add_ps(_mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x20),
                                _mm256_permute2f128_ps(acc[2 * i], acc[2 * i + 1], 0x31));
    }
    Reg pairs[2];  // lane l: [key 4i+l (2 partials), key 4i+2+l (2 partials)]
#pragma GCC unroll 8
    for (int i = 0; i < 2; ++i) {
      const __m256d a = _mm256_castps_pd(halves[2 * i]);
      const __m256d b = _mm256_castps_pd(halves[2 * i + 1]);
      pairs[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)),
                               _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    // Lane 4l+p now holds key 2p+l; the permutation puts key i in lane i.
    const Reg sums = _mm256_add_ps(_mm256_shuffle_ps(pairs[0], pairs[1], 0x88),
                                   _mm256_shuffle_ps(pairs[0], pairs[1], 0xDD));
    return _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
};

}  // namespace
}  // namespace dspark::kernels
