// linear_small with AVX512_BF16 (Bf16Math::kDotBf16): vdpbf16ps multiplies 32 bf16 weights by 32
// bf16 activations and adds pairwise into 16 f32 lanes, one instruction where the exact path needs
// two FMAs plus the widening. See linear_small_variants.h for why everything here is file-local.
#include <immintrin.h>

#include "model/kernels/linear_small_avx512_tiles.h"
#include "model/kernels/linear_small_variants.h"

namespace dspark::kernels::linear_small_detail {
namespace {

__mmask16 first_lanes16(int64_t count) { return static_cast<__mmask16>((1u << count) - 1u); }
__mmask32 first_lanes32(int64_t count) {
  return static_cast<__mmask32>((uint64_t{1} << count) - 1u);
}

struct Bf16DotWeights {
  using WElem = uint16_t;
  using XElem = uint16_t;
  using WVec = __m512i;
  using XVec = __m512i;
  static constexpr int kStep = 32;
  static WVec load_w(const uint16_t* w) { return _mm512_loadu_si512(w); }
  static WVec load_w_tail(const uint16_t* w, int64_t count) {
    return _mm512_maskz_loadu_epi16(first_lanes32(count), w);
  }
  static XVec load_x(const uint16_t* x) { return _mm512_loadu_si512(x); }
  static __m512 madd(__m512 acc, WVec w, XVec x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);
  }
};

// 32 activations rounded to bf16 (nearest even), zero past count.
struct StoreBf16 {
  using Elem = uint16_t;
  static void store(uint16_t* dst, const float* src, int64_t count) {
    const int64_t low = count < 16 ? count : 16;
    const int64_t high = count > 16 ? count - 16 : 0;
    const __m512 a = _mm512_maskz_loadu_ps(first_lanes16(low), src);
    const __m512 b = _mm512_maskz_loadu_ps(first_lanes16(high), src + 16);
    _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(b, a));
  }
};

}  // namespace

void columns_avx512bf16_dot(const Problem& p, int64_t n_begin, int64_t n_end) {
  for_each_tile<Avx512Tiles<Bf16DotWeights>>(p, n_begin, n_end);
}

void pack_x_bf16_avx512bf16(const float* x, int64_t m, int64_t k, void* out) {
  pack_x<32, StoreBf16>(x, m, k, static_cast<uint16_t*>(out));
}

}  // namespace dspark::kernels::linear_small_detail
