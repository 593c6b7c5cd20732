// linear_quant with AVX2 (and the AVX-512 CPUs without VNNI): each 32-bit lane holds 4 values of
// one row, as in the VNNI variant, and vpmaddubsw + vpmaddwd stand in for vpdpbusd. vpmaddubsw
// saturates at 16 bits, so the unsigned weight bytes go in as nibbles (at most 15 x 127 x 2 per
// pair): Q4_0's two nibbles are two values, and a Q8_0 byte is 16 hi + lo. A 16-row group runs as
// two halves of 8 rows (one ymm per row of x); up to 4 rows of x share each weight load.
#include <immintrin.h>

#include "model/kernels/linear_quant_variants.h"

namespace dspark::kernels::linear_quant_detail {
namespace {

constexpr int kMaxRows = 4;

int32_t x_word(const int8_t* xq, int64_t word) {
  int32_t v;
  __builtin_memcpy(&v, xq + 4 * word, 4);
  return v;
}

// Each lane's 4 products of unsigned nibbles u and signed bytes x, summed to int32, times `scale`
// (1 or 16: the nibble's weight in its byte).
__m256i dot4(__m256i u, __m256i x, __m256i scale) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), scale);
}

// y[row : row + MR, 16 g + 8 half : + 8) for one half of one group.
template <QuantType kType, int MR>
void half_rows(const Problem& p, int64_t g, int half, int64_t row) {
  const int64_t group_block = group_block_bytes(kType);
  const uint8_t* gb = p.w + g * p.blocks * group_block;
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1), sixteens = _mm256_set1_epi16(16);
  __m256 acc[MR];
#pragma GCC unroll 8
  for (int j = 0; j < MR; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < p.blocks; ++b, gb += group_block) {
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 16 * half)));
    const uint8_t* values = gb + kScaleBytes + 32 * half;
    __m256i sum[MR];
    const int8_t* xq[MR];
#pragma GCC unroll 8
    for (int j = 0; j < MR; ++j) {
      sum[j] = _mm256_set1_epi32(p.xbias[(row + j) * p.blocks + b]);
      xq[j] = p.xq + (row + j) * p.k + b * kQuantBlock;
    }
    constexpr int kWords = kType == QuantType::kQ8_0 ? 8 : 4;
#pragma GCC unroll 8
    for (int word = 0; word < kWords; ++word) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + word * kSubGroupBytes));
      const __m256i lo = _mm256_and_si256(packed, low_nibbles);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
#pragma GCC unroll 8
      for (int j = 0; j < MR; ++j) {
        const __m256i x = _mm256_set1_epi32(x_word(xq[j], word));
        if constexpr (kType == QuantType::kQ8_0) {
          sum[j] = _mm256_add_epi32(sum[j], _mm256_add_epi32(dot4(lo, x, ones), dot4(hi, x, sixteens)));
        } else {
          const __m256i x_high = _mm256_set1_epi32(x_word(xq[j], word + 4));
          sum[j] = _mm256_add_epi32(sum[j], _mm256_add_epi32(dot4(lo, x, ones), dot4(hi, x_high, ones)));
        }
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < MR; ++j) {
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(p.xd[(row + j) * p.blocks + b]));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[j]), scale, acc[j]);
    }
  }
  const int64_t col = g * kQuantGroupRows + 8 * half;
  const int64_t cols = p.n - col < 8 ? p.n - col : 8;
  if (cols <= 0) return;
#pragma GCC unroll 8
  for (int j = 0; j < MR; ++j) {
    float* y = p.y + (row + j) * p.ldy + col;
    alignas(32) float out[8];
    _mm256_store_ps(out, acc[j]);
    for (int64_t c = 0; c < cols; ++c) y[c] = p.accumulate ? y[c] + out[c] : out[c];
  }
}

template <QuantType kType>
void group(const Problem& p, int64_t g) {
  for (int half = 0; half < 2; ++half) {
    int64_t row = 0;
    for (; row + kMaxRows <= p.m; row += kMaxRows) half_rows<kType, kMaxRows>(p, g, half, row);
    switch (p.m - row) {
      case 1: half_rows<kType, 1>(p, g, half, row); break;
      case 2: half_rows<kType, 2>(p, g, half, row); break;
      case 3: half_rows<kType, 3>(p, g, half, row); break;
      default: break;
    }
  }
}

}  // namespace

void groups_avx2(const Problem& p, int64_t g_begin, int64_t g_end) {
  for (int64_t g = g_begin; g < g_end; ++g) {
    if (p.type == QuantType::kQ8_0) group<QuantType::kQ8_0>(p, g);
    else group<QuantType::kQ4_0>(p, g);
  }
}

}  // namespace dspark::kernels::linear_quant_detail
