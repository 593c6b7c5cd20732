// The AVX-512 SIMD policy shared by the kernels' *_avx512.cpp variants (attention_small,
// softmax_row, row_ops): one 16-float register and its operations, including exp. It lives in an
// anonymous namespace so that every template instantiated on it has internal linkage and the
// linker cannot swap an AVX-512 copy into a generic caller. Include only from files compiled with
// AVX-512 flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace dspark::kernels {
namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kMaxRowRegs = 8;  // head_dim <= 128: 8 for q + 16 accumulators
  static constexpr int kAccumulators = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  // 16 bf16 (uint16_t bits) widened exactly: each becomes the upper half of an f32.
  static Reg load_bf16(const uint16_t* p) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg broadcast(float x) { return _mm512_set1_ps(x); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static float reduce_add(Reg v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(Reg v) { return _mm512_reduce_max_ps(v); }

  // exp(x) = 2^n * exp(f) with n = round(x / ln 2) and |f| <= ln(2) / 2, where exp(f) is its
  // degree-7 Taylor polynomial (truncation error < 1e-8 relative, below f32 rounding). ln 2 is
  // split in a short high part (n * hi is exact) and a correction, so f keeps full precision.
  // Inputs below -87 (including -infinity) give exactly 0.
  static Reg exp(Reg x) {
    const __mmask16 underflow = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const Reg n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    Reg f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    f = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), f);
    Reg p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow), _mm512_scalef_ps(p, n));
  }

  // Transposing reduction: halving the width at each step while interleaving registers, so 16
  // horizontal sums cost 15 shuffle pairs instead of 16 full reductions. Lane i of the result is
  // the sum of acc[i].
  [[gnu::always_inline]] static Reg sum_each(const Reg (&acc)[kWidth]) {
    Reg halves[8];  // [keys 2i | 2i+1], 8 partial lanes each
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      halves[i] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0x44),
                                _mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0xEE));
    }
    Reg quarters[4];  // 128-bit lane l holds key 4i+l, 4 partial lanes each
#pragma GCC unroll 8
    for (int i = 0; i < 4; ++i) {
      quarters[i] = _mm512_add_ps(_mm512_shuffle_f32x4(halves[2 * i], halves[2 * i + 1], 0x88),
                                  _mm512_shuffle_f32x4(halves[2 * i], halves[2 * i + 1], 0xDD));
    }
    Reg pairs[2];  // lane l: [key l (2 partials), key 4+l (2)] from quarters 2i, 2i+1
#pragma GCC unroll 8
    for (int i = 0; i < 2; ++i) {
      const __m512d a = _mm512_castps_pd(quarters[2 * i]);
      const __m512d b = _mm512_castps_pd(quarters[2 * i + 1]);
      pairs[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                               _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    // Lane 4l+p now holds key 4p+l; the permutation puts key i in lane i.
    const Reg sums = _mm512_add_ps(_mm512_shuffle_ps(pairs[0], pairs[1], 0x88),
                                   _mm512_shuffle_ps(pairs[0], pairs[1], 0xDD));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, sums);
  }
};

}  // namespace
}  // namespace dspark::kernels
