// linear_small with AVX-512: f32 weights, and bf16 (Bf16Math::kExact) or f16 weights widened to f32
// in registers. See linear_small_variants.h for why everything here is file-local.
#include <immintrin.h>

#include "model/kernels/linear_small_avx512_tiles.h"
#include "model/kernels/linear_small_variants.h"

namespace dspark::kernels::linear_small_detail {
namespace {

__mmask16 first_lanes(int64_t count) { return static_cast<__mmask16>((1u << count) - 1u); }

struct F32Weights {
  using WElem = float;
  using XElem = float;
  using WVec = __m512;
  using XVec = __m512;
  static constexpr int kStep = 16;
  static WVec load_w(const float* w) { return _mm512_loadu_ps(w); }
  static WVec load_w_tail(const float* w, int64_t count) {
    return _mm512_maskz_loadu_ps(first_lanes(count), w);
  }
  static XVec load_x(const float* x) { return _mm512_loadu_ps(x); }
  static __m512 madd(__m512 acc, WVec w, XVec x) { return _mm512_fmadd_ps(w, x, acc); }
};

// The same f32 weights read as two 32-byte halves of each line. With four or more rows of x per
// tile the kernel is compute-bound while it streams, and there the halves ran faster than whole
// 64-byte loads (all 28 layers' projections of the Qwen3-0.6B shape plus the LM head, f32 weights
// in DRAM, one process switching per call, 3 runs: m = 8 -8% to -13%, m = 4 -6%; the whole
// forward at context 1024, switching per step, 2 runs: T(8) -3.5% and -4.5%). With fewer rows
// each x load serves more weight rows (2 x 8 and 3 x 6 tiles), so weight loads dominate and the
// extra load per line made the tile load-bound (m = 2 and 3: +4-5%); those keep whole-line loads.
// bf16 weights are read 32 bytes at a time already.
constexpr int64_t kHalfLineRows = 4;
struct F32HalfLineWeights : F32Weights {
  static WVec load_w(const float* w) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(w)), _mm256_loadu_ps(w + 8), 1);
  }
};

// bf16 is the top half of an f32, so widening is exact: zero-extend to 32 bits, shift left 16.
__m512 widen_bf16(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
// Every f16 value (subnormals included) is an f32 value; vcvtph2ps converts exactly.
__m512 widen_f16(__m256i bits) { return _mm512_cvtph_ps(bits); }

// 16-bit weights read 32 bytes at a time and widened to f32 by Widen.
template <__m512 (*Widen)(__m256i)>
struct WidenedWeights : F32Weights {
  using WElem = uint16_t;
  static WVec load_w(const uint16_t* w) {
    return Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
  }
  static WVec load_w_tail(const uint16_t* w, int64_t count) {
    return Widen(_mm256_maskz_loadu_epi16(first_lanes(count), w));
  }
};
using Bf16ExactWeights = WidenedWeights<widen_bf16>;
using F16Weights = WidenedWeights<widen_f16>;

struct StoreF32 {
  using Elem = float;
  static void store(float* dst, const float* src, int64_t count) {
    _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(first_lanes(count), src));
  }
};

}  // namespace

void pack_x_avx512(const float* x, int64_t m, int64_t k, void* out) {
  pack_x<16, StoreF32>(x, m, k, static_cast<float*>(out));
}

void columns_avx512(const Problem& p, int64_t n_begin, int64_t n_end) {
  switch (p.w_dtype) {
    case WeightDType::kF32:
      if (p.m >= kHalfLineRows) return for_each_tile<Avx512Tiles<F32HalfLineWeights>>(p, n_begin, n_end);
      return for_each_tile<Avx512Tiles<F32Weights>>(p, n_begin, n_end);
    case WeightDType::kBF16: return for_each_tile<Avx512Tiles<Bf16ExactWeights>>(p, n_begin, n_end);
    case WeightDType::kF16: return for_each_tile<Avx512Tiles<F16Weights>>(p, n_begin, n_end);
  }
}

}  // namespace dspark::kernels::linear_small_detail
