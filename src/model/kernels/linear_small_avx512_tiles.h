// Internal to linear_small: the AVX-512 register tiles shared by the avx512 and avx512bf16
// variants. Include only from files compiled with AVX-512 flags; instantiate only with types from
// an anonymous namespace (see linear_small_variants.h).
//
// Math describes one way of multiplying weights with activations:
//   WElem / XElem   element types in memory; WVec / XVec their register form
//   kStep           elements of k consumed per load
//   load_w, load_w_tail (count < kStep, zero-filled), load_x
//   madd(acc, w, x) accumulates into 16 f32 lanes
//
// Packed x: rows in tiles of kTileRows (the last one shorter), each tile laid out as
// [padded_k / kStep][rows][kStep], zero-filled past k. One pointer then reaches every row's
// activations for a step at constant offsets; with a pointer per row, 8 rows of x plus the weight
// rows ran out of general registers and spilled. Packing costs m * k element copies per call.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "model/kernels/linear_small_variants.h"

namespace dspark::kernels::linear_small_detail {

constexpr int kTileRows = 8;

// acc[j][r] += x[j, i:i+kStep] * w[r, i:i+kStep] for the MR x NR tile. Each weight vector is
// reused for MR rows of x and each activation vector for NR weight rows.
template <class Math, int MR, int NR, bool kTail>
[[gnu::always_inline]] inline void accumulate_step(__m512 (&acc)[MR][NR],
                                                   const typename Math::XElem* x,  // packed tile
                                                   const typename Math::WElem* w,  // [NR, k]
                                                   int64_t k, int64_t i) {
  typename Math::WVec wv[NR];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    wv[r] = kTail ? Math::load_w_tail(w + r * k + i, k - i) : Math::load_w(w + r * k + i);
  }
#pragma GCC unroll 8
  for (int j = 0; j < MR; ++j) {
    typename Math::XVec xv = Math::load_x(x + i * MR + j * Math::kStep);
    // Keeps xv in a register. Left alone, GCC folds the load into each of the NR FMAs, so the
    // 8x3 tile issued 27 loads per 24 FMAs and ran at half speed, bound by the load ports.
    __asm__("" : "+v"(xv));
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) acc[j][r] = Math::madd(acc[j][r], wv[r], xv);
  }
}

// Where dot_tile's k range sits in the whole dot product. A product whose x tile would not fit in
// L1 next to the streamed weights is computed in k blocks (see Avx512Tiles::k_block): the 16-lane
// accumulators are parked in `spill` between blocks and picked up unchanged, so every lane sums
// the same terms in the same order as one pass would, whatever the blocking.
struct KRange {
  int64_t begin, end;  // 0 < begin: start from spill; end < k: park the sums in spill
  __m512* spill;       // [MR * NR]
};

// y[j, r] = x[j, :] . w[r, :] for MR rows of x and NR weight rows, all MR * NR sums in registers,
// over the k columns of `range`. Each output's sum runs over k in the same order whatever MR and
// NR are, so a row's result does not depend on the other rows in the call.
//
// w_next: the rows the following tile will read, addressed like w (row r at w_next + r * k,
// column i at + i). Requesting them one tile ahead, a cache line per row per line consumed here,
// keeps enough misses in flight: the hardware prefetchers alone ramp up too slowly on the few
// concurrent rows (3-8) a tile streams (measured on one Zen 5 core, m = 1: 14-17 GB/s without,
// 27-28 GB/s with). A plain (T0) prefetch rather than a non-temporal one: it measured the same,
// and for m > kTileRows the block is read again by the next row tile.
template <class Math, int MR, int NR>
void dot_tile(const typename Math::XElem* x,       // packed tile of MR rows
              const typename Math::WElem* w,       // [NR, k]
              const typename Math::WElem* w_next,  // [NR, k]
              int64_t k, const KRange& range,
              float* y,  // [MR, y_stride]
              int64_t y_stride, bool accumulate) {
  constexpr int64_t kLine = 64 / sizeof(typename Math::WElem);  // elements per cache line
  static_assert(kLine % Math::kStep == 0 && kPackAlignment % Math::kStep == 0);
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int j = 0; j < MR; ++j) {
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) acc[j][r] = range.begin == 0 ? _mm512_setzero_ps() : range.spill[j * NR + r];
  }
  int64_t i = range.begin;
  for (; i + kLine <= range.end; i += kLine) {
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) _mm_prefetch(w_next + r * k + i, _MM_HINT_T0);
#pragma GCC unroll 4
    for (int64_t s = 0; s < kLine; s += Math::kStep) {
      accumulate_step<Math, MR, NR, false>(acc, x, w, k, i + s);
    }
  }
  for (; i + Math::kStep <= range.end; i += Math::kStep)
    accumulate_step<Math, MR, NR, false>(acc, x, w, k, i);
  if (i < range.end) accumulate_step<Math, MR, NR, true>(acc, x, w, k, i);
  if (range.end < k) {
#pragma GCC unroll 8
    for (int j = 0; j < MR; ++j) {
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) range.spill[j * NR + r] = acc[j][r];
    }
    return;
  }
#pragma GCC unroll 8
  for (int j = 0; j < MR; ++j) {
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const float sum = _mm512_reduce_add_ps(acc[j][r]);
      y[j * y_stride + r] = accumulate ? y[j * y_stride + r] + sum : sum;
    }
  }
}

// Tiles for for_each_tile: blocks of 48 weight rows, up to 8 rows of x per tile, so verifying 8
// tokens is one pass over the weights. The fewer rows of x, the more weight rows per register
// tile: MR * NR accumulators + NR weight vectors + one x vector must fit in 32 zmm registers, and
// at least 8 independent accumulators hide the FMA latency (8x3, 6x4, 4x6, 2x8, 1x8). Measured
// on the 2-core Zen 5 dev box, bf16 decode-step matmuls at m = 8: 39 ms in one 8x3 pass against
// 41-45 ms in two passes (6x4 then 2x8), at m = 1 ~25 ms either way.
//
// A block's k blocks (see k_block) run one after another, each reloading its x block into L1, so
// the wider the block the fewer reloads. 48 columns (one ColumnRuns chunk) against 24, the whole
// forward at context 1024 switching per step, 4 runs of 16-30 rounds: at m = 8 o_proj -2.7 to
// -3.9% and down -2.0 to -3.3% (the k-blocked ones), the others unchanged; at m = 1 unchanged.
// The price is the spill: 48 x 8 accumulators, 24 KB of stack.
template <class Math>
struct Avx512Tiles {
  static constexpr int kColumns = 48;
  static constexpr int kMaxRows = kTileRows;

  static constexpr int weight_rows_per_tile(int x_rows) {
    return x_rows <= 2 ? 8 : x_rows <= 4 ? 6 : x_rows <= 6 ? 4 : 3;
  }

  // Columns of k per block: the packed x block of MR rows stays within kXBlockBytes, so it and
  // the weight rows streaming past it share L1 (48 KB on Zen 5). Unblocked, the 8 rows of a
  // 3072-wide x (96 KB) came from L2 on every step: the down projection of an 8-token verify step
  // cost 2x its 1-token time against 1.4x for the 1024-wide projections. Alternating runs of
  // every projection of the Qwen3-0.6B shape at m = 8 (median of 5): 32 KB blocks gave o_proj
  // -8%, down -7%, the 1024-wide ones unchanged (their x fits whole); 16 KB blocks gained more on
  // o_proj and down but lost as much on the 1024-wide ones.
  static constexpr int64_t kXBlockBytes = 32 * 1024;
  template <int MR>
  static constexpr int64_t k_block() {
    constexpr int64_t kLine = 64 / sizeof(typename Math::WElem);
    constexpr int64_t elements = kXBlockBytes / (MR * static_cast<int64_t>(sizeof(typename Math::XElem)));
    return elements / kLine * kLine;
  }

  template <int MR>
  static void tile_rows(const Problem& p, int64_t row, int64_t col, int cols) {
    constexpr int NR = weight_rows_per_tile(MR);
    constexpr int64_t kBlock = k_block<MR>();
    const int64_t k = p.k;
    const auto* x = static_cast<const typename Math::XElem*>(p.x_packed) + row * padded_k(k);
    const auto* w = static_cast<const typename Math::WElem*>(p.w) + col * k;
    float* y = p.y + row * p.ldy + col;
    __m512 spill[kColumns * MR];
    for (int64_t begin = 0; begin == 0 || begin < k; begin += kBlock) {  // once for k = 0
      const int64_t end = begin + kBlock < k ? begin + kBlock : k;
      // After the block's last weight rows, the next rows read are this block's first ones one
      // k block on, or at the end of k, the following column block's first ones from column 0.
      const int64_t wrap = end < k ? kBlock : cols * k - begin;
      int c = 0;
      for (; c + NR <= cols; c += NR) {
        const auto* next = c + NR < cols ? w + (c + NR) * k : w + wrap;
        dot_tile<Math, MR, NR>(x, w + c * k, next, k, {begin, end, spill + c * MR}, y + c, p.ldy, p.accumulate);
      }
      for (; c < cols; ++c) {
        const auto* next = c + 1 < cols ? w + (c + 1) * k : w + wrap;
        dot_tile<Math, MR, 1>(x, w + c * k, next, k, {begin, end, spill + c * MR}, y + c, p.ldy, p.accumulate);
      }
    }
  }

  static void tile(const Problem& p, int64_t row, int rows, int64_t col, int cols) {
    switch (rows) {
      case 1: return tile_rows<1>(p, row, col, cols);
      case 2: return tile_rows<2>(p, row, col, cols);
      case 3: return tile_rows<3>(p, row, col, cols);
      case 4: return tile_rows<4>(p, row, col, cols);
      case 5: return tile_rows<5>(p, row, col, cols);
      case 6: return tile_rows<6>(p, row, col, cols);
      case 7: return tile_rows<7>(p, row, col, cols);
      default: return tile_rows<8>(p, row, col, cols);
    }
  }
};

// Packs x as described at the top, converting each element with Store: store(dst, src, count)
// writes kStep elements from src[0:count) (count <= kStep, the rest zero).
template <int kStep, class Store>
void pack_x(const float* x, int64_t m, int64_t k, typename Store::Elem* out) {
  const int64_t kp = padded_k(k);
  for (int64_t row0 = 0; row0 < m; row0 += kTileRows) {
    const int64_t rows = m - row0 < kTileRows ? m - row0 : kTileRows;
    typename Store::Elem* tile = out + row0 * kp;
    for (int64_t i = 0; i < kp; i += kStep) {
      const int64_t count = k - i >= kStep ? kStep : (k > i ? k - i : 0);
      for (int64_t j = 0; j < rows; ++j) {
        Store::store(tile + i * rows + j * kStep, x + (row0 + j) * k + i, count);
      }
    }
  }
}

}  // namespace dspark::kernels::linear_small_detail
