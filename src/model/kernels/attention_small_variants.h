// Internal to attention_small: one task (a sequence's new tokens against one kv head), the
// per-ISA variants that run it, and the algorithm they share.
//
// The ISA files instantiate HeadGroupAttention with a SIMD policy (simd_*.h) from an anonymous
// namespace, so every instantiation has internal linkage and the linker cannot swap an AVX-512
// copy into a generic caller.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "model/kernels/attention_small.h"
#include "model/kernels/bf16.h"

namespace dspark::kernels::attention_small_detail {

// Rows of a task: row r is new token r / group of the sequence, query head r % group of the kv
// head's group. Row r attends to keys 0 .. n_past + r / group (causal) or all n_past + n_new.
struct HeadGroupTask {
  const float* q;            // row r at q + (r / group) * q_token_stride + (r % group) * head_dim
  float* out;                // row r at out + (r / group) * out_token_stride + (r % group) * head_dim
  int64_t q_token_stride;    // >= n_heads * head_dim (q may sit in the fused q/k/v rows)
  int64_t out_token_stride;  // n_heads * head_dim
  int64_t group;         // query heads per kv head
  int64_t n_new;
  int64_t n_past;
  bool causal;     // false: every row sees all n_past + n_new keys
  const void* k;   // this kv head's keys: float [positions, head_dim], or bf16 (uint16_t) key-blocked
                   // [positions / 16][head_dim / 2][16][2] (model/kv_cache.h)
  const void* v;   // [positions, head_dim], float or bf16
  int64_t head_dim;
  float scale;
  float* scores;          // scratch [group * n_new, scores_stride]
  int64_t scores_stride;  // n_past + n_new rounded up to kScoresAlignment
  float* inv_sums;        // scratch [group * n_new]
  float* key_tail;        // scratch [kScoresAlignment, head_dim]: the last keys, zero-padded, or a
                          // bf16 key block widened to f32 rows
  void* bf16_scratch;     // scratch for attend_avx512bf16 (bf16_scratch_bytes), else unused
  int64_t* q_offsets;     // [group * n_new]: where row r starts in q (filled by make_task, once per
                          // task, keeping integer divisions out of the kernels' loops)
  int64_t* out_offsets;   // [group * n_new]: where row r starts in out
};

// Also the widest SIMD width, so a block of scores never runs past a row.
constexpr int64_t kScoresAlignment = 16;

using HeadGroupKernel = void (*)(const HeadGroupTask& task);
void attend_generic(const HeadGroupTask& task);
void attend_avx2(const HeadGroupTask& task);    // head_dim % 8 == 0
void attend_avx512(const HeadGroupTask& task);  // head_dim % 16 == 0
// A bf16 cache, widened to f32 as it is read.
void attend_generic_bf16_cache(const HeadGroupTask& task);
void attend_avx2_bf16_cache(const HeadGroupTask& task);    // head_dim % 8 == 0
void attend_avx512_bf16_cache(const HeadGroupTask& task);  // head_dim % 16 == 0
// A bf16 cache with vdpbf16ps dot products (attention_small_avx512bf16.cpp), head_dim % 32 == 0.
void attend_avx512bf16(const HeadGroupTask& task);
// The bytes of HeadGroupTask::bf16_scratch attend_avx512bf16 needs.
inline int64_t bf16_scratch_bytes(int64_t rows, int64_t head_dim, int64_t scores_stride) {
  return (rows * head_dim + rows * scores_stride + head_dim) * 2 + 64;
}

// Policy V (a SIMD width and its operations):
//   kWidth, Reg, zero, load, load_bf16 (kWidth bf16 widened to f32), store, broadcast, add, sub, mul, fmadd, max, reduce_add, reduce_max,
//   exp (exactly 0 for -infinity, so hidden keys drop out), sum_each(const Reg (&acc)[kWidth])
//   returning the lane sums of the kWidth registers as one register, kMaxRowRegs: the most
//   registers a head_dim row may take for the row-at-a-time paths (0 disables them), and
//   kAccumulators: output registers to keep live (about half the register file).
//
// Every path sums each score over head_dim in ascending order and each output over keys in
// ascending order, so a token's result is the same bits whatever else shares the call.
// KV: the cache's element type, float or uint16_t (bf16, widened to f32 as it is loaded).
template <class V, class KV = float>
struct HeadGroupAttention {
  using Reg = typename V::Reg;
  static constexpr int W = V::kWidth;
  static_assert(std::is_same_v<KV, float> || std::is_same_v<KV, uint16_t>);
  static_assert(kScoresAlignment % W == 0);
  // Keys whose values stay in L1 while every row block consumes them (64 * 128 floats = 32 KiB).
  static constexpr int64_t kKeyBlock = 64;
  // Outputs held in registers across a key block, as rows x registers per row.
  static constexpr int kAccumulators = V::kAccumulators;
  static constexpr int kSegmentRegs = 4;  // registers per row when a row does not fit whole
  static_assert(kAccumulators >= kSegmentRegs);

  static void run(const HeadGroupTask& t) {
    compute_scores(t);
    softmax_rows(t);
    accumulate_values(t);
  }

  static int64_t rows(const HeadGroupTask& t) { return t.group * t.n_new; }
  static int64_t keys(const HeadGroupTask& t) { return t.n_past + t.n_new; }
  static const float* q_row(const HeadGroupTask& t, int64_t r) { return t.q + t.q_offsets[r]; }
  static float* out_row(const HeadGroupTask& t, int64_t r) { return t.out + t.out_offsets[r]; }
  static const KV* keys_of(const HeadGroupTask& t) { return static_cast<const KV*>(t.k); }
  static const KV* values_of(const HeadGroupTask& t) { return static_cast<const KV*>(t.v); }
  static Reg load_kv(const KV* p) {
    if constexpr (std::is_same_v<KV, float>) {
      return V::load(p);
    } else {
      return V::load_bf16(p);
    }
  }

  // Calls f.template operator()<R>() for R = regs if 1 <= regs <= V::kMaxRowRegs; false otherwise.
  template <int R = 1, class F>
  static bool with_row_regs(int64_t regs, F&& f) {
    if constexpr (R > V::kMaxRowRegs) {
      return false;
    } else {
      if (regs != R) return with_row_regs<R + 1>(regs, f);
      f.template operator()<R>();
      return true;
    }
  }

  // ---- scores[r, j] = scale * q_r . k_j, W keys at a time (reduced together by sum_each) ----

  // Scores read f32 key rows: the f32 cache itself, or a bf16 key block widened into key_tail.
  using ScoreBlock = void (*)(const HeadGroupTask& t, const float* k_block, int64_t j0);

  static void compute_scores(const HeadGroupTask& t) {
    const int64_t d = t.head_dim;
    ScoreBlock score_block = score_block_by_columns;
    with_row_regs(d / W, [&]<int R>() { score_block = score_block_by_rows<R>; });
    if constexpr (std::is_same_v<KV, uint16_t>) {
      // A bf16 cache's keys come in blocks of 16 (key-blocked, model/kv_cache.h): each is widened
      // to 16 f32 rows, then scored W keys at a time. The last block's keys past the cache's end
      // are scored too (the cache is allocated in whole blocks) and hidden by the softmax.
      static_assert(kBf16KeyBlock <= kScoresAlignment && kBf16KeyBlock % W == 0);
      for (int64_t j0 = 0; j0 < keys(t); j0 += kBf16KeyBlock) {
        const uint16_t* block = keys_of(t) + j0 * d;
        for (int64_t jj = 0; jj < kBf16KeyBlock; ++jj) {
          for (int64_t c = 0; c < d; ++c) t.key_tail[jj * d + c] = bf16_to_f32(block[bf16_key_offset(jj, c)]);
        }
        for (int64_t jj = 0; jj < kBf16KeyBlock; jj += W) score_block(t, t.key_tail + jj * d, j0 + jj);
      }
    } else {
      const int64_t full_end = keys(t) / W * W;
      const float* k = keys_of(t);
      for (int64_t j0 = 0; j0 < full_end; j0 += W) score_block(t, k + j0 * d, j0);
      if (full_end == keys(t)) return;
      // The last keys take the same path, zero-padded to W, so a key's score never depends on
      // where the cache ends.
      for (int64_t jj = 0; jj < W; ++jj) {
        const bool present = full_end + jj < keys(t);
        for (int64_t c = 0; c < d; ++c) t.key_tail[jj * d + c] = present ? k[(full_end + jj) * d + c] : 0.0f;
      }
      score_block(t, t.key_tail, full_end);
    }
  }

  // Rows kTileRows at a time through score_tile, the rest (all of a decode step's) through
  // score_rows. The key groups run outermost: every row tile uses a group's keys while they are in
  // L1, and the keys stream in at an even pace, which lets the prefetches (see score_tile) keep
  // ahead of them.
  template <int R>
  static void score_block_by_rows(const HeadGroupTask& t, const float* k_block, int64_t j0) {
    int64_t r = 0;
    if constexpr (kTileRows > 0) {
      const int64_t tiles = rows(t) / kTileRows;
      for (int kg = 0; kg < W; kg += kTileKeys) {
        for (int64_t tile = 0; tile < tiles; ++tile) score_tile(t, k_block, j0, kg, tile);
      }
      r = tiles * kTileRows;
    }
    score_rows<R>(t, k_block, j0, r);
  }

  // A register tile of kTileRows rows x kTileKeys keys fills the W accumulators one sum_each
  // reduces, so each k load serves kTileRows FMAs and each q load kTileKeys (score_rows: one k
  // load per FMA). The lanes sum the same products in the same order and sum_each reduces every
  // register alike, so a score is the same bits on either path.
  static constexpr int kTileKeys = W >= 4 ? 4 : 1;
  static constexpr int kTileRows = W >= 8 ? W / kTileKeys : 0;
  // Rows tile * kTileRows .. + kTileRows against keys j0 + kg .. + kTileKeys. With many rows the
  // pass is compute-bound and the out-of-order window cannot hide the key misses, so the first
  // kTileKeys row tiles each prefetch one key of the next block's group, a line per load: the
  // next block's keys arrive spread evenly over this block (measured, 28 layers, context 1024,
  // KV in DRAM, 8 tokens: 11.2-11.4 -> 10.3-10.9 ms with the value prefetches unchanged; a burst
  // of all of the next block's prefetches from the first row tile gave the former).
  static void score_tile(const HeadGroupTask& t, const float* k_block, int64_t j0, int kg, int64_t tile) {
    constexpr int RT = kTileRows > 0 ? kTileRows : 1, KT = kTileKeys;
    const int64_t d = t.head_dim, r0 = tile * RT;
    const Reg scale = V::broadcast(t.scale);
    const float* q[RT];
    for (int i = 0; i < RT; ++i) q[i] = q_row(t, r0 + i);
    const bool prefetch = tile < KT && j0 + 2 * W <= keys(t);
    const float* next_key = k_block + (W + kg + tile) * d;
    Reg acc[W];  // acc[i * KT + kk]: row r0 + i, key j0 + kg + kk
#pragma GCC unroll 16
    for (int a = 0; a < W; ++a) acc[a] = V::zero();
    for (int64_t c = 0; c < d; c += W) {
      Reg kv[KT];
#pragma GCC unroll 4
      for (int kk = 0; kk < KT; ++kk) kv[kk] = V::load(k_block + (kg + kk) * d + c);
      if (prefetch) __builtin_prefetch(next_key + c);
#pragma GCC unroll 4
      for (int i = 0; i < RT; ++i) {
        const Reg qv = V::load(q[i] + c);
#pragma GCC unroll 4
        for (int kk = 0; kk < KT; ++kk) acc[i * KT + kk] = V::fmadd(qv, kv[kk], acc[i * KT + kk]);
      }
    }
    float sums[W];
    V::store(sums, V::mul(V::sum_each(acc), scale));
    for (int i = 0; i < RT; ++i) {
      std::memcpy(t.scores + (r0 + i) * t.scores_stride + j0 + kg, sums + i * KT, KT * sizeof(float));
    }
  }

  // Rows from r_begin one at a time; q_r stays in R registers: one load per FMA instead of two.
  template <int R>
  static void score_rows(const HeadGroupTask& t, const float* k_block, int64_t j0, int64_t r_begin) {
    const Reg scale = V::broadcast(t.scale);
    for (int64_t r = r_begin; r < rows(t); ++r) {
      const float* q = q_row(t, r);
      Reg qv[R];
#pragma GCC unroll 8
      for (int c = 0; c < R; ++c) qv[c] = V::load(q + c * W);
      // Chunk-major: the W accumulators advance together, so no FMA waits on the one before it.
      Reg acc[W];
#pragma GCC unroll 16
      for (int jj = 0; jj < W; ++jj) acc[jj] = V::zero();
#pragma GCC unroll 8
      for (int c = 0; c < R; ++c) {
#pragma GCC unroll 16
        for (int jj = 0; jj < W; ++jj) {
          acc[jj] = V::fmadd(qv[c], V::load(k_block + (jj * R + c) * W), acc[jj]);
        }
      }
      V::store(t.scores + r * t.scores_stride + j0, V::mul(V::sum_each(acc), scale));
    }
  }

  // Any head_dim: q_r is reloaded chunk by chunk, the W key rows walked column-wise.
  static void score_block_by_columns(const HeadGroupTask& t, const float* k_block, int64_t j0) {
    const int64_t d = t.head_dim;
    const Reg scale = V::broadcast(t.scale);
    for (int64_t r = 0; r < rows(t); ++r) {
      const float* q = q_row(t, r);
      Reg acc[W];
#pragma GCC unroll 16
      for (int jj = 0; jj < W; ++jj) acc[jj] = V::zero();
      for (int64_t c = 0; c < d; c += W) {
        const Reg qc = V::load(q + c);
#pragma GCC unroll 16
        for (int jj = 0; jj < W; ++jj) {
          acc[jj] = V::fmadd(qc, V::load(k_block + jj * d + c), acc[jj]);
        }
      }
      V::store(t.scores + r * t.scores_stride + j0, V::mul(V::sum_each(acc), scale));
    }
  }

  // ---- softmax ----

  // Turns each score row into unnormalised probabilities exp(s - max) with the causally hidden
  // keys (and the padding up to scores_stride) at exactly 0; inv_sums[r] gets 1 / their sum.
  static void softmax_rows(const HeadGroupTask& t) {
    constexpr float kHidden = -__builtin_huge_valf();
    for (int64_t r = 0; r < rows(t); ++r) {
      float* s = t.scores + r * t.scores_stride;
      const int64_t visible = t.causal ? t.n_past + r / t.group + 1 : t.n_past + t.n_new;
      for (int64_t j = visible; j < t.scores_stride; ++j) s[j] = kHidden;
      Reg max_reg = V::broadcast(kHidden);
      for (int64_t j = 0; j < t.scores_stride; j += W) max_reg = V::max(max_reg, V::load(s + j));
      const Reg max = V::broadcast(V::reduce_max(max_reg));
      Reg sum = V::zero();
      for (int64_t j = 0; j < t.scores_stride; j += W) {
        const Reg e = V::exp(V::sub(V::load(s + j), max));
        V::store(s + j, e);
        sum = V::add(sum, e);
      }
      t.inv_sums[r] = 1.0f / V::reduce_add(sum);
    }
  }

  // ---- out_r = inv_sums[r] * sum_j scores[r, j] v_j ----

  // Adds keys [j_begin, j_end) to out[r0:r0+RB, c0:c0+CH*W). The RB x CH accumulators stay in
  // registers across the keys; each v_j load serves RB rows.
  template <int RB, int CH>
  static void accumulate_segment(const HeadGroupTask& t, int64_t r0, int64_t c0, int64_t j_begin,
                                 int64_t j_end) {
    Reg acc[RB][CH];
    float* out_rows[RB];
    const float* p_rows[RB];
#pragma GCC unroll 16
    for (int rr = 0; rr < RB; ++rr) {
      out_rows[rr] = out_row(t, r0 + rr) + c0;
      p_rows[rr] = t.scores + (r0 + rr) * t.scores_stride;
#pragma GCC unroll 8
      for (int c = 0; c < CH; ++c) acc[rr][c] = V::load(out_rows[rr] + c * W);
    }
    // The next key block's values are asked for spread over the row blocks, as score_tile does
    // for keys: with CH row blocks, row block b prefetches line b of each key's segment (same
    // measurement, with score_tile's prefetches: 10.3-10.9 -> 9.6-9.8 ms). Fewer rows: the first
    // row block asks for every line. Lines [pf_begin, pf_end) of the segment are this block's.
    const int64_t row_block = r0 / RB;
    const bool spread = rows(t) >= CH * RB;
    const int64_t pf_begin = spread ? row_block : 0;
    const int64_t pf_end = spread ? (row_block < CH ? row_block + 1 : 0) : (r0 == 0 ? CH : 0);
    const int64_t prefetch_end = keys(t) - kKeyBlock;
    for (int64_t j = j_begin; j < j_end; ++j) {
      const KV* v_row = values_of(t) + j * t.head_dim + c0;
      Reg v[CH];
#pragma GCC unroll 8
      for (int c = 0; c < CH; ++c) v[c] = load_kv(v_row + c * W);
      if (j < prefetch_end) {
        for (int64_t c = pf_begin; c < pf_end; ++c) __builtin_prefetch(v_row + kKeyBlock * t.head_dim + c * W);
      }
#pragma GCC unroll 16
      for (int rr = 0; rr < RB; ++rr) {
        const Reg p = V::broadcast(p_rows[rr][j]);
#pragma GCC unroll 8
        for (int c = 0; c < CH; ++c) acc[rr][c] = V::fmadd(p, v[c], acc[rr][c]);
      }
    }
#pragma GCC unroll 16
    for (int rr = 0; rr < RB; ++rr) {
#pragma GCC unroll 8
      for (int c = 0; c < CH; ++c) V::store(out_rows[rr] + c * W, acc[rr][c]);
    }
  }

  // All rows over segments [c0, c0 + CH*W) of head_dim, RB rows at a time, the rest one by one.
  template <int RB, int CH>
  static void accumulate_rows(const HeadGroupTask& t, int64_t c0, int64_t j_begin, int64_t j_end) {
    int64_t r = 0;
    for (; r + RB <= rows(t); r += RB) accumulate_segment<RB, CH>(t, r, c0, j_begin, j_end);
    for (; r < rows(t); ++r) accumulate_segment<1, CH>(t, r, c0, j_begin, j_end);
  }

  using KeyBlock = void (*)(const HeadGroupTask& t, int64_t j_begin, int64_t j_end);

  // When a whole row of head_dim fits in R registers, v_j is read in memory order, once per
  // row block.
  template <int R>
  static void accumulate_whole_rows(const HeadGroupTask& t, int64_t j_begin, int64_t j_end) {
    constexpr int kRows = kAccumulators / R < 4 ? kAccumulators / R : 4;
    accumulate_rows<kRows, R>(t, 0, j_begin, j_end);
  }

  static void accumulate_in_segments(const HeadGroupTask& t, int64_t j_begin, int64_t j_end) {
    constexpr int kRows = kAccumulators / kSegmentRegs;
    const int64_t full = kSegmentRegs * W;
    int64_t c0 = 0;
    for (; c0 + full <= t.head_dim; c0 += full) {
      accumulate_rows<kRows, kSegmentRegs>(t, c0, j_begin, j_end);
    }
    for (; c0 < t.head_dim; c0 += W) accumulate_rows<kRows, 1>(t, c0, j_begin, j_end);
  }

  static void accumulate_values(const HeadGroupTask& t) {
    KeyBlock key_block = accumulate_in_segments;
    // Whole rows stream v in memory order, which matters when few rows make the pass
    // memory-bound; with enough rows to fill the segment blocks those do fewer loads per FMA.
    if (rows(t) < kAccumulators / kSegmentRegs) {
      with_row_regs(t.head_dim / W, [&]<int R>() { key_block = accumulate_whole_rows<R>; });
    }
    for (int64_t r = 0; r < rows(t); ++r) {
      float* o = out_row(t, r);
      for (int64_t c = 0; c < t.head_dim; c += W) V::store(o + c, V::zero());
    }
    for (int64_t j = 0; j < keys(t); j += kKeyBlock) {
      key_block(t, j, j + kKeyBlock < keys(t) ? j + kKeyBlock : keys(t));
    }
    for (int64_t r = 0; r < rows(t); ++r) {
      float* o = out_row(t, r);
      const Reg inv_sum = V::broadcast(t.inv_sums[r]);
      for (int64_t c = 0; c < t.head_dim; c += W) {
        V::store(o + c, V::mul(V::load(o + c), inv_sum));
      }
    }
  }
};

}  // namespace dspark::kernels::attention_small_detail
