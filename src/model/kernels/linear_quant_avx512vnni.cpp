// linear_quant with AVX512-VNNI: vpdpbusd multiplies the 64 unsigned weight bytes of a sub-group
// (4 values of each of 16 rows) by 4 signed activation bytes broadcast to every lane and adds each
// lane's 4 products into its int32, so every lane is one output row and no horizontal sums are
// needed. Up to 8 rows of x share each weight load. See linear_quant_variants.h for the layout.
#include <immintrin.h>

#include "model/kernels/cpu_isa.h"
#include "model/kernels/linear_quant_variants.h"

namespace dspark::kernels::linear_quant_detail {
namespace {

constexpr int kMaxRows = 8;
// Software prefetch this many group blocks ahead (13-26 KB), into L2: an L1 prefetch holds one of
// the core's few line-fill buffers until its line arrives, which capped a decode step's stream at
// ~23 GB/s on a 2-core Xeon (q4_0, one row); into L2, 48 blocks ahead: ~29 GB/s, and q8_0 28 -> 30
// (a 600 MB matrix, no other change; 12, 24, 32 and 96 blocks and an L3 hint measured slower).
// A Zen 5 core's hardware prefetchers follow the one-row pass's single stream by themselves, and
// there the software requests cost: q8_0's decode step ran ~10% slower with them at any distance
// (2, 4, 8, 16, 48 or 96 blocks, L1 or L2), so that pass skips them on AMD CPUs
// (cpu_is_amd()). Several rows are compute-bound and keep few loads in flight, so
// their passes prefetch everywhere (docs/benchmarks.md).
constexpr int64_t kPrefetchBlocks = 48;

// acc + the unsigned bytes of w times 4 signed activation bytes at x broadcast to every lane,
// the broadcast folded into vpdpbusd's memory operand ({1to16}): GCC keeps _mm512_set1_epi32 a
// separate vpbroadcastd, which with 8 rows is half the loop's instructions.
__m512i dot_broadcast(__m512i acc, __m512i w, const int8_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(x)));
  return acc;
}

// y[row : row + MR, 16 g : 16 g + 16) for one 16-row group.
template <QuantType kType, int MR>
void group_rows(const Problem& p, int64_t g, int64_t row) {
  const int64_t group_block = group_block_bytes(kType);
  const uint8_t* gb = p.w + g * p.blocks * group_block;
  __m512 acc[MR];
#pragma GCC unroll 8
  for (int j = 0; j < MR; ++j) acc[j] = _mm512_setzero_ps();
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  // Block b's activations of rows row .. row + MR - 1, one after another (Problem::xq_by_block).
  const int8_t* xq = p.xq_by_block + row * kQuantBlock;
  const float* xd = p.xd_by_block + row;
  const int32_t* xbias = p.xbias_by_block + row;
  const bool prefetch = MR > 1 || !cpu_is_amd();
  for (int64_t b = 0; b < p.blocks; ++b, gb += group_block, xq += p.m * kQuantBlock, xd += p.m, xbias += p.m) {
    if (prefetch) {
      const char* ahead = reinterpret_cast<const char*>(gb + kPrefetchBlocks * group_block);
      for (int64_t line = 0; line < group_block; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T1);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
    const uint8_t* values = gb + kScaleBytes;
    // With one or two rows a block's dot products would form one dependent chain per row, bound by
    // vpdpbusd's latency: the odd words go to a second chain (integer sums, so the result is the same).
    constexpr int kChains = MR <= 2 ? 2 : 1;
    __m512i sum[kChains][MR];
#pragma GCC unroll 8
    for (int j = 0; j < MR; ++j) {
      sum[0][j] = _mm512_set1_epi32(xbias[j]);
      if constexpr (kChains == 2) sum[1][j] = _mm512_setzero_si512();
    }
    if constexpr (kType == QuantType::kQ8_0) {
#pragma GCC unroll 8
      for (int word = 0; word < 8; ++word) {
        const __m512i w = _mm512_loadu_si512(values + word * kSubGroupBytes);
        __m512i* chain = sum[word % kChains];
#pragma GCC unroll 8
        for (int j = 0; j < MR; ++j) chain[j] = dot_broadcast(chain[j], w, xq + j * kQuantBlock + 4 * word);
      }
    } else {
#pragma GCC unroll 4
      for (int word = 0; word < 4; ++word) {
        const __m512i packed = _mm512_loadu_si512(values + word * kSubGroupBytes);
        const __m512i lo = _mm512_and_si512(packed, low_nibbles);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles);
#pragma GCC unroll 8
        for (int j = 0; j < MR; ++j) {
          sum[0][j] = dot_broadcast(sum[0][j], lo, xq + j * kQuantBlock + 4 * word);
          sum[kChains - 1][j] = dot_broadcast(sum[kChains - 1][j], hi, xq + j * kQuantBlock + 4 * (word + 4));
        }
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < MR; ++j) {
      if constexpr (kChains == 2) sum[0][j] = _mm512_add_epi32(sum[0][j], sum[1][j]);
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(xd[j]));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[0][j]), scale, acc[j]);
    }
  }
  const int64_t col = g * kQuantGroupRows;
  const int64_t cols = p.n - col < kQuantGroupRows ? p.n - col : kQuantGroupRows;
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1u);
#pragma GCC unroll 8
  for (int j = 0; j < MR; ++j) {
    float* y = p.y + (row + j) * p.ldy + col;
    const __m512 out = p.accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), acc[j]) : acc[j];
    _mm512_mask_storeu_ps(y, mask, out);
  }
}

template <QuantType kType>
void group(const Problem& p, int64_t g) {
  int64_t row = 0;
  for (; row + kMaxRows <= p.m; row += kMaxRows) group_rows<kType, kMaxRows>(p, g, row);
  switch (p.m - row) {
    case 1: group_rows<kType, 1>(p, g, row); break;
    case 2: group_rows<kType, 2>(p, g, row); break;
    case 3: group_rows<kType, 3>(p, g, row); break;
    case 4: group_rows<kType, 4>(p, g, row); break;
    case 5: group_rows<kType, 5>(p, g, row); break;
    case 6: group_rows<kType, 6>(p, g, row); break;
    case 7: group_rows<kType, 7>(p, g, row); break;
    default: break;
  }
}

}  // namespace

void groups_avx512vnni(const Problem& p, int64_t g_begin, int64_t g_end) {
  for (int64_t g = g_begin; g < g_end; ++g) {
    if (p.type == QuantType::kQ8_0) group<QuantType::kQ8_0>(p, g);
    else group<QuantType::kQ4_0>(p, g);
  }
}

}  // namespace dspark::kernels::linear_quant_detail
