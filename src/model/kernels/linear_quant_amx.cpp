// linear_quant with AMX (Intel's tile matrix unit): one tdpbsud multiplies a tile of up to 16 rows
// of x's int8 activations by one block of a 16-row weight group and leaves every (row of x,
// output row) integer sum of that block in a tile of int32; the packed layout
// (linear_quant_variants.h) is already the tile unit's B layout, since 4 consecutive values of each
// of 16 output rows make one 64-byte tile row. Q8_0's 8 sub-groups are the B tile as they lie in
// memory; Q4_0's 4 nibble sub-groups are split into 8 byte rows first. The int32 sums then go
// through the same f32 steps as the VNNI variant (bias, convert, d_w d_x, fused add, block after
// block), so both give the same bits.
//
// The tiles are usable only once the process holds the kernel's permission for the tile state
// (cpu_isa.cpp asks for it, and Isa::kAmx exists only where it was granted). Each call configures
// its thread's tiles and releases them at the end, so a thread holds no tile state between calls.
#include <immintrin.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "model/kernels/linear_quant_variants.h"

namespace dspark::kernels::linear_quant_detail {
namespace {

constexpr int kTileRows = 16;  // rows of x per tile (the tile unit's maximum)
constexpr int kSteps = 4;      // blocks in flight: one int32 tile each

// Tile numbers (immediates in the instructions): 0-3 the sums of 4 blocks, 4-5 x, 6-7 weights.
#define DSPARK_TILE_SUM(i) i
#define DSPARK_TILE_X0 4
#define DSPARK_TILE_X1 5
#define DSPARK_TILE_W0 6
#define DSPARK_TILE_W1 7

// The 64-byte operand of ldtilecfg (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles(int rows) {
  TileConfig config;
  for (int t = 0; t < kSteps; ++t) {
    config.rows[t] = static_cast<uint8_t>(rows);
    config.bytes_per_row[t] = 4 * kQuantGroupRows;  // 16 int32 sums per row of x
  }
  for (int t : {DSPARK_TILE_X0, DSPARK_TILE_X1}) {
    config.rows[t] = static_cast<uint8_t>(rows);
    config.bytes_per_row[t] = kQuantBlock;  // one block of activations per row of x
  }
  for (int t : {DSPARK_TILE_W0, DSPARK_TILE_W1}) {
    config.rows[t] = kQuantBlock / 4;  // 8 rows of 4 values x 16 output rows
    config.bytes_per_row[t] = kSubGroupBytes;
  }
  // Not _tile_loadconfig: GCC 12's declares its operand as the first 8 bytes only, so the stores of
  // the row counts may be dropped as dead (seen: SIGILL at the first tile load).
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

constexpr int64_t kTileBytes = kQuantBlock / 4 * kSubGroupBytes;  // one block of a group as a B tile

// The B tile of one Q4_0 block: low nibbles are values 4 w .. 4 w + 3 of word w, high nibbles those
// of word w + 4 (llama.cpp's order), so the 8 tile rows are the 4 low halves, then the 4 high ones.
void split_nibbles(const uint8_t* values, uint8_t* tile) {
  const __m512i low_nibbles = _mm512_set1_epi8(0x0F);
  for (int word = 0; word < 4; ++word) {
    const __m512i packed = _mm512_loadu_si512(values + word * kSubGroupBytes);
    _mm512_store_si512(tile + word * kSubGroupBytes, _mm512_and_si512(packed, low_nibbles));
    _mm512_store_si512(tile + (word + 4) * kSubGroupBytes,
                       _mm512_and_si512(_mm512_srli_epi16(packed, 4), low_nibbles));
  }
}

// Every block of group g as B tiles, for the tiles of rows that follow.
void split_group(const Problem& p, int64_t g, uint8_t* split) {
  const int64_t group_block = group_block_bytes(QuantType::kQ4_0);
  const uint8_t* gb = p.w + g * p.blocks * group_block;
  for (int64_t b = 0; b < p.blocks; ++b) split_nibbles(gb + b * group_block + kScaleBytes, split + b * kTileBytes);
  // The tile loads are asm statements the compiler does not see reading `split`.
  __asm__ volatile("" ::: "memory");
}

// Where the B tile of block b lies: in the packed group itself (Q8_0), or in the group's blocks
// split once for all tiles of rows (Q4_0).
template <QuantType kType>
const uint8_t* weight_tile(const uint8_t* group, const uint8_t* split, int64_t b) {
  if constexpr (kType == QuantType::kQ8_0) return group + b * group_block_bytes(kType) + kScaleBytes;
  else return split + b * kTileBytes;
}

// acc[j] += (sum[j] + bias[j]) * (d_w * d_x[j]) for the rows of one block: the VNNI variant's steps.
template <int MR>
void scale_block(const int32_t (&sums)[kTileRows][kQuantGroupRows], const uint8_t* block, const Problem& p,
                 int64_t row, int64_t b, __m512 (&acc)[kTileRows]) {
  const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block)));
#pragma GCC unroll 16
  for (int j = 0; j < MR; ++j) {
    const int64_t at = (row + j) * p.blocks + b;
    const __m512i sum = _mm512_add_epi32(_mm512_load_si512(sums[j]), _mm512_set1_epi32(p.xbias[at]));
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(p.xd[at]));
    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc[j]);
  }
}

// y[row : row + MR, 16 g : 16 g + 16) for one 16-row group; the tiles are configured for MR rows.
template <QuantType kType, int MR>
void group_rows(const Problem& p, int64_t g, int64_t row, const uint8_t* split) {
  const int64_t group_block = group_block_bytes(kType);
  const uint8_t* gb = p.w + g * p.blocks * group_block;
  const int8_t* x = p.xq + row * p.k;
  const long x_stride = static_cast<long>(p.k);
  alignas(64) int32_t sums[kSteps][kTileRows][kQuantGroupRows];
  __m512 acc[kTileRows];
#pragma GCC unroll 16
  for (int j = 0; j < MR; ++j) acc[j] = _mm512_setzero_ps();

  int64_t b = 0;
  for (; b + kSteps <= p.blocks; b += kSteps) {
    const uint8_t* block = gb + b * group_block;
    // Four independent sums in flight; x and the weights alternate between two tiles each.
    _tile_loadd(DSPARK_TILE_X0, x + (b + 0) * kQuantBlock, x_stride);
    _tile_loadd(DSPARK_TILE_W0, weight_tile<kType>(gb, split, b), kSubGroupBytes);
    _tile_zero(DSPARK_TILE_SUM(0));
    _tile_dpbsud(DSPARK_TILE_SUM(0), DSPARK_TILE_X0, DSPARK_TILE_W0);
    _tile_loadd(DSPARK_TILE_X1, x + (b + 1) * kQuantBlock, x_stride);
    _tile_loadd(DSPARK_TILE_W1, weight_tile<kType>(gb, split, b + 1), kSubGroupBytes);
    _tile_zero(DSPARK_TILE_SUM(1));
    _tile_dpbsud(DSPARK_TILE_SUM(1), DSPARK_TILE_X1, DSPARK_TILE_W1);
    _tile_loadd(DSPARK_TILE_X0, x + (b + 2) * kQuantBlock, x_stride);
    _tile_loadd(DSPARK_TILE_W0, weight_tile<kType>(gb, split, b + 2), kSubGroupBytes);
    _tile_zero(DSPARK_TILE_SUM(2));
    _tile_dpbsud(DSPARK_TILE_SUM(2), DSPARK_TILE_X0, DSPARK_TILE_W0);
    _tile_loadd(DSPARK_TILE_X1, x + (b + 3) * kQuantBlock, x_stride);
    _tile_loadd(DSPARK_TILE_W1, weight_tile<kType>(gb, split, b + 3), kSubGroupBytes);
    _tile_zero(DSPARK_TILE_SUM(3));
    _tile_dpbsud(DSPARK_TILE_SUM(3), DSPARK_TILE_X1, DSPARK_TILE_W1);
    _tile_stored(DSPARK_TILE_SUM(0), sums[0], 4 * kQuantGroupRows);
    _tile_stored(DSPARK_TILE_SUM(1), sums[1], 4 * kQuantGroupRows);
    _tile_stored(DSPARK_TILE_SUM(2), sums[2], 4 * kQuantGroupRows);
    _tile_stored(DSPARK_TILE_SUM(3), sums[3], 4 * kQuantGroupRows);
    for (int step = 0; step < kSteps; ++step) scale_block<MR>(sums[step], block + step * group_block, p, row, b + step, acc);
  }
  for (; b < p.blocks; ++b) {
    const uint8_t* block = gb + b * group_block;
    _tile_loadd(DSPARK_TILE_X0, x + b * kQuantBlock, x_stride);
    _tile_loadd(DSPARK_TILE_W0, weight_tile<kType>(gb, split, b), kSubGroupBytes);
    _tile_zero(DSPARK_TILE_SUM(0));
    _tile_dpbsud(DSPARK_TILE_SUM(0), DSPARK_TILE_X0, DSPARK_TILE_W0);
    _tile_stored(DSPARK_TILE_SUM(0), sums[0], 4 * kQuantGroupRows);
    scale_block<MR>(sums[0], block, p, row, b, acc);
  }

  const int64_t col = g * kQuantGroupRows;
  const int64_t cols = p.n - col < kQuantGroupRows ? p.n - col : kQuantGroupRows;
  const __mmask16 mask = static_cast<__mmask16>((1u << cols) - 1u);
#pragma GCC unroll 16
  for (int j = 0; j < MR; ++j) {
    float* y = p.y + (row + j) * p.ldy + col;
    const __m512 out = p.accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), acc[j]) : acc[j];
    _mm512_mask_storeu_ps(y, mask, out);
  }
}

using RowsKernel = void (*)(const Problem& p, int64_t g, int64_t row, const uint8_t* split);

template <QuantType kType, int... MR>
constexpr RowsKernel rows_kernel(int rows, std::integer_sequence<int, MR...>) {
  RowsKernel kernel = nullptr;
  ((rows == MR + 1 ? (kernel = group_rows<kType, MR + 1>, 0) : 0), ...);
  return kernel;
}

template <QuantType kType>
RowsKernel rows_kernel(int rows) {
  return rows_kernel<kType>(rows, std::make_integer_sequence<int, kTileRows>{});
}

// Group by group; each passes its tiles of 16 rows over the group's blocks, which stay in cache
// (and, for Q4_0, are split once for all of them). The tiles are configured again only where the
// last tile of rows is a short one.
template <QuantType kType>
void groups(const Problem& p, int64_t g_begin, int64_t g_end) {
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  thread_local std::vector<Line> split_tiles;  // 64-byte aligned, for split_nibbles' stores
  if constexpr (kType == QuantType::kQ4_0) split_tiles.resize(static_cast<size_t>(p.blocks * kTileBytes / 64));
  uint8_t* split = reinterpret_cast<uint8_t*>(split_tiles.data());
  int configured = 0;
  for (int64_t g = g_begin; g < g_end; ++g) {
    if constexpr (kType == QuantType::kQ4_0) split_group(p, g, split);
    for (int64_t row = 0; row < p.m; row += kTileRows) {
      const int rows = static_cast<int>(p.m - row < kTileRows ? p.m - row : kTileRows);
      if (rows != configured) configure_tiles(configured = rows);
      rows_kernel<kType>(rows)(p, g, row, split);
    }
  }
  _tile_release();
}

}  // namespace

void groups_amx(const Problem& p, int64_t g_begin, int64_t g_end) {
  if (p.type == QuantType::kQ8_0) groups<QuantType::kQ8_0>(p, g_begin, g_end);
  else groups<QuantType::kQ4_0>(p, g_begin, g_end);
}

}  // namespace dspark::kernels::linear_quant_detail
