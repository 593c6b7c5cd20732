// attention_small over a bf16 KV cache with AVX512_BF16 (head_dim a multiple of 32): both dot
// products on vdpbf16ps, which multiplies 32 bf16 pairs exactly and adds them pairwise into 16 f32
// lanes, one instruction for what the f32 path does in two FMAs on twice the bytes.
//
// - Scores: q is rounded to bf16 once per task. The cache keeps keys key-blocked (16 keys' pair p
//   in one register, model/kv_cache.h), so each instruction adds one pair of q's elements times
//   the same pair of 16 keys into 16 lanes, one per key: the scores come out whole, with none of
//   the horizontal sums a [key][head_dim] layout needs (about as many vector operations as the
//   dot products themselves at head_dim 128).
// - Softmax in f32 on the scores; each probability is then rounded to bf16, and the row's sum is
//   taken over the rounded values, so the weights the values are summed with add up to one.
// - Values: vdpbf16ps pairs two keys, so value rows j and j+1 are interleaved in registers
//   (unpacklo/hi of 16-bit elements) and multiplied by the broadcast pair (p_j, p_j+1). The
//   accumulators then hold each 32-column chunk's columns in the order the unpacks leave them;
//   the final pass puts them back in place while it divides by the sum.
//
// Every row's scores and outputs go through the same instructions in the same order whatever the
// other rows of the call are, so a token's output is the same bits decoded alone or verified in a
// block (attention_small_variants.h says why that matters).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "model/kernels/attention_small_variants.h"
#include "model/kernels/simd_avx512.h"

namespace dspark::kernels::attention_small_detail {
namespace {

constexpr int W = 16;          // f32 lanes in a register: one key block's scores
static_assert(kBf16KeyBlock == W);
constexpr int kChunk = 32;     // bf16 elements in a register
constexpr int64_t kKeyBlock = 64;  // keys whose value rows stay in L1 while every row block reads them

// The task's scratch in bf16_scratch: q rounded to bf16, the probabilities in bf16, a zero row.
struct Buffers {
  uint16_t* q;     // [rows, head_dim]
  uint16_t* p;     // [rows, scores_stride]
  uint16_t* zero;  // [head_dim]
};

Buffers buffers_of(const HeadGroupTask& t) {
  const int64_t rows = t.group * t.n_new;
  uint16_t* base = static_cast<uint16_t*>(t.bf16_scratch);
  return {base, base + rows * t.head_dim, base + rows * t.head_dim + rows * t.scores_stride};
}

int64_t rows_of(const HeadGroupTask& t) { return t.group * t.n_new; }
int64_t keys_of(const HeadGroupTask& t) { return t.n_past + t.n_new; }

// 32 floats rounded to bf16 (nearest even).
void store_bf16(uint16_t* dst, const float* src) {
  _mm512_storeu_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + W), _mm512_loadu_ps(src)));
}

void round_queries(const HeadGroupTask& t, const Buffers& b) {
  for (int64_t r = 0; r < rows_of(t); ++r) {
    const float* q = t.q + t.q_offsets[r];
    for (int64_t c = 0; c < t.head_dim; c += kChunk) store_bf16(b.q + r * t.head_dim + c, q + c);
  }
}

__m512 dot_pairs(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

int32_t pair_at(const uint16_t* row, int64_t p) {
  int32_t pair;
  std::memcpy(&pair, row + 2 * p, sizeof pair);
  return pair;
}

// Scores of rows r0 .. r0+RT against the 16 keys of the block at j0. The cache holds keys
// key-blocked (model/kv_cache.h): register p holds pair p of all 16 keys, so multiplying it by row
// r's pair p broadcast adds that pair's products to all 16 scores at once, each in its own lane;
// no horizontal sums. Each row runs two chains (even and odd pairs, added at the end) whatever RT
// is, so a row's scores are the same bits in any tile. With `prefetch` the tile also asks for the
// next block, two lines per step, while the arithmetic runs.
template <int RT>
void score_tile(const HeadGroupTask& t, const Buffers& b, const uint16_t* k_block, int64_t j0, int64_t r0,
                bool prefetch) {
  const int64_t pairs = t.head_dim / 2;
  const uint16_t* q[RT];
  __m512 even[RT], odd[RT];
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i) {
    q[i] = b.q + (r0 + i) * t.head_dim;
    even[i] = _mm512_setzero_ps();
    odd[i] = _mm512_setzero_ps();
  }
  const uint16_t* next = k_block + kBf16KeyBlock * t.head_dim;
  for (int64_t p = 0; p < pairs; p += 2) {
    const __m512i k0 = _mm512_loadu_si512(k_block + p * kChunk);
    const __m512i k1 = _mm512_loadu_si512(k_block + (p + 1) * kChunk);
    if (prefetch) {
      __builtin_prefetch(next + p * kChunk);
      __builtin_prefetch(next + (p + 1) * kChunk);
    }
#pragma GCC unroll 8
    for (int i = 0; i < RT; ++i) {
      even[i] = dot_pairs(even[i], k0, _mm512_set1_epi32(pair_at(q[i], p)));
      odd[i] = dot_pairs(odd[i], k1, _mm512_set1_epi32(pair_at(q[i], p + 1)));
    }
  }
  const __m512 scale = _mm512_set1_ps(t.scale);
#pragma GCC unroll 8
  for (int i = 0; i < RT; ++i) {
    _mm512_storeu_ps(t.scores + (r0 + i) * t.scores_stride + j0, _mm512_mul_ps(_mm512_add_ps(even[i], odd[i]), scale));
  }
}

// Every row against every key block: 8-row tiles, then 4, 2 and 1. The last block is scored
// whole (the cache is allocated in whole blocks); the softmax hides its keys past the end.
void compute_scores(const HeadGroupTask& t, const Buffers& b) {
  const uint16_t* k = static_cast<const uint16_t*>(t.k);
  const int64_t rows = rows_of(t);
  for (int64_t j0 = 0; j0 < keys_of(t); j0 += kBf16KeyBlock) {
    const uint16_t* k_block = k + j0 * t.head_dim;
    const bool prefetch = j0 + kBf16KeyBlock < keys_of(t);
    int64_t r = 0;
    for (; r + 8 <= rows; r += 8) score_tile<8>(t, b, k_block, j0, r, prefetch && r == 0);
    if (r + 4 <= rows) {
      score_tile<4>(t, b, k_block, j0, r, prefetch && r == 0);
      r += 4;
    }
    if (r + 2 <= rows) {
      score_tile<2>(t, b, k_block, j0, r, prefetch && r == 0);
      r += 2;
    }
    if (r < rows) score_tile<1>(t, b, k_block, j0, r, prefetch && r == 0);
  }
}

// Probabilities exp(s - max) rounded to bf16 into b.p (hidden keys and the padding exactly 0);
// inv_sums[r] = 1 / the sum of the rounded values.
void softmax_rows(const HeadGroupTask& t, const Buffers& b) {
  constexpr float kHidden = -__builtin_huge_valf();
  for (int64_t r = 0; r < rows_of(t); ++r) {
    float* s = t.scores + r * t.scores_stride;
    uint16_t* p = b.p + r * t.scores_stride;
    const int64_t visible = t.causal ? t.n_past + r / t.group + 1 : t.n_past + t.n_new;
    for (int64_t j = visible; j < t.scores_stride; ++j) s[j] = kHidden;
    __m512 max_reg = _mm512_set1_ps(kHidden);
    for (int64_t j = 0; j < t.scores_stride; j += W) max_reg = _mm512_max_ps(max_reg, _mm512_loadu_ps(s + j));
    const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(max_reg));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < t.scores_stride; j += W) {
      const __m256i bits = (__m256i)_mm512_cvtneps_pbh(Avx512::exp(_mm512_sub_ps(_mm512_loadu_ps(s + j), max)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + j), bits);
      sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16)));
    }
    t.inv_sums[r] = 1.0f / _mm512_reduce_add_ps(sum);
  }
}

// Adds key pairs [j_begin, j_end) (j_begin even) to rows r0 .. r0+RB, columns c0 .. c0 + CH*32.
// acc[rr][ch][0 / 1]: the low / high unpack of chunk ch, kept in out in that (permuted) order.
template <int RB, int CH>
void accumulate_segment(const HeadGroupTask& t, const Buffers& b, int64_t r0, int64_t c0, int64_t j_begin,
                        int64_t j_end) {
  const int64_t d = t.head_dim;
  const uint16_t* v = static_cast<const uint16_t*>(t.v);
  __m512 acc[RB][CH][2];
  float* out[RB];
  const uint16_t* p[RB];
#pragma GCC unroll 4
  for (int rr = 0; rr < RB; ++rr) {
    out[rr] = t.out + t.out_offsets[r0 + rr] + c0;
    p[rr] = b.p + (r0 + rr) * t.scores_stride;
#pragma GCC unroll 4
    for (int ch = 0; ch < CH; ++ch) {
      acc[rr][ch][0] = _mm512_loadu_ps(out[rr] + ch * kChunk);
      acc[rr][ch][1] = _mm512_loadu_ps(out[rr] + ch * kChunk + W);
    }
  }
  // The first row block asks for the next key block's lines of this segment.
  const bool prefetch = r0 == 0;
  const int64_t prefetch_end = keys_of(t) - kKeyBlock - 1;
  for (int64_t j = j_begin; j < j_end; j += 2) {
    // An odd last key pairs with the zero row (its partner's probability is 0 too).
    const uint16_t* v0 = v + j * d + c0;
    const uint16_t* v1 = j + 1 < keys_of(t) ? v0 + d : b.zero + c0;
    if (prefetch && j < prefetch_end) {
#pragma GCC unroll 4
      for (int ch = 0; ch < CH; ++ch) {
        __builtin_prefetch(v0 + kKeyBlock * d + ch * kChunk);
        __builtin_prefetch(v0 + (kKeyBlock + 1) * d + ch * kChunk);
      }
    }
    __m512i lo[CH], hi[CH];
#pragma GCC unroll 4
    for (int ch = 0; ch < CH; ++ch) {
      const __m512i a = _mm512_loadu_si512(v0 + ch * kChunk);
      const __m512i c = _mm512_loadu_si512(v1 + ch * kChunk);
      lo[ch] = _mm512_unpacklo_epi16(a, c);
      hi[ch] = _mm512_unpackhi_epi16(a, c);
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < RB; ++rr) {
      int32_t pair;
      std::memcpy(&pair, p[rr] + j, sizeof pair);
      const __m512i weights = _mm512_set1_epi32(pair);
#pragma GCC unroll 4
      for (int ch = 0; ch < CH; ++ch) {
        acc[rr][ch][0] = dot_pairs(acc[rr][ch][0], lo[ch], weights);
        acc[rr][ch][1] = dot_pairs(acc[rr][ch][1], hi[ch], weights);
      }
    }
  }
#pragma GCC unroll 4
  for (int rr = 0; rr < RB; ++rr) {
#pragma GCC unroll 4
    for (int ch = 0; ch < CH; ++ch) {
      _mm512_storeu_ps(out[rr] + ch * kChunk, acc[rr][ch][0]);
      _mm512_storeu_ps(out[rr] + ch * kChunk + W, acc[rr][ch][1]);
    }
  }
}

// Every row over column segments of CH chunks (then single chunks), RB rows at a time, then the
// leftover rows one by one.
template <int RB, int CH>
void accumulate_block(const HeadGroupTask& t, const Buffers& b, int64_t j_begin, int64_t j_end) {
  const int64_t chunks = t.head_dim / kChunk;
  int64_t ch0 = 0;
  for (; ch0 + CH <= chunks; ch0 += CH) {
    int64_t r = 0;
    for (; r + RB <= rows_of(t); r += RB) accumulate_segment<RB, CH>(t, b, r, ch0 * kChunk, j_begin, j_end);
    for (; r < rows_of(t); ++r) accumulate_segment<1, CH>(t, b, r, ch0 * kChunk, j_begin, j_end);
  }
  for (; ch0 < chunks; ++ch0) {
    for (int64_t r = 0; r < rows_of(t); ++r) accumulate_segment<1, 1>(t, b, r, ch0 * kChunk, j_begin, j_end);
  }
}

// Column c of a chunk sits, after the unpacks, in lane 4 (c / 8) + c % 4 of the low accumulator
// (c % 8 < 4) or of the high one: these put columns 0-15 and 16-31 back in order.
void finish_rows(const HeadGroupTask& t) {
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int64_t r = 0; r < rows_of(t); ++r) {
    float* o = t.out + t.out_offsets[r];
    const __m512 inv_sum = _mm512_set1_ps(t.inv_sums[r]);
    for (int64_t c = 0; c < t.head_dim; c += kChunk) {
      const __m512 lo = _mm512_loadu_ps(o + c), hi = _mm512_loadu_ps(o + c + W);
      _mm512_storeu_ps(o + c, _mm512_mul_ps(_mm512_permutex2var_ps(lo, first, hi), inv_sum));
      _mm512_storeu_ps(o + c + W, _mm512_mul_ps(_mm512_permutex2var_ps(lo, second, hi), inv_sum));
    }
  }
}

void accumulate_values(const HeadGroupTask& t, const Buffers& b) {
  std::memset(b.zero, 0, t.head_dim * sizeof(uint16_t));
  for (int64_t r = 0; r < rows_of(t); ++r) std::memset(t.out + t.out_offsets[r], 0, t.head_dim * sizeof(float));
  // Few rows: whole rows (4 chunks, 128 columns) per pass, so the values stream in memory order;
  // many rows: 4-row blocks over 2-chunk segments, more FMAs per value load.
  const bool few = rows_of(t) < 4;
  for (int64_t j = 0; j < keys_of(t); j += kKeyBlock) {
    const int64_t end = j + kKeyBlock < keys_of(t) ? j + kKeyBlock : keys_of(t);
    if (few) {
      accumulate_block<2, 4>(t, b, j, end);
    } else {
      accumulate_block<4, 2>(t, b, j, end);
    }
  }
  finish_rows(t);
}

}  // namespace

void attend_avx512bf16(const HeadGroupTask& t) {
  const Buffers b = buffers_of(t);
  round_queries(t, b);
  compute_scores(t, b);
  softmax_rows(t, b);
  accumulate_values(t, b);
}

}  // namespace dspark::kernels::attention_small_detail
