// linear_quant: packing, the activations' quantization, the variant choice and the split of
// 16-row groups over threads.
#include "model/kernels/linear_quant.h"

#include <omp.h>

#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/kernels/column_runs.h"
#include "model/kernels/cpu_isa.h"
#include "model/kernels/linear_quant_variants.h"
#include "model/ggml_quants.h"
#include "model/safetensors.h"

namespace dspark::kernels {
namespace {

using linear_quant_detail::group_block_bytes;
using linear_quant_detail::kScaleBytes;
using linear_quant_detail::kSubGroupBytes;
using linear_quant_detail::Problem;
using linear_quant_detail::sub_groups;

int64_t n_groups(int64_t n) { return (n + kQuantGroupRows - 1) / kQuantGroupRows; }

void check_shape(int64_t n, int64_t k) {
  DSPARK_ASSERT(n >= 0 && k >= 0);
  if (k % kQuantBlock != 0)
    throw Error("quantized weights: rows of " + std::to_string(k) + " values are not whole blocks of 32");
}

// Where, inside its group's block, byte t of word `word` (values 4 word .. 4 word + 3 of a Q8_0
// block, or nibble pairs 4 word .. of a Q4_0 block) of lane `lane`'s row lies.
int64_t packed_value_offset(int64_t lane, int64_t word, int64_t t) {
  return kScaleBytes + word * kSubGroupBytes + lane * 4 + t;
}

// Offset of the value bytes inside a llama.cpp block (after its f16 scale), and the bias the
// packed form adds to each stored byte (Q8_0's int8 becomes unsigned; Q4_0's nibbles already are).
constexpr int64_t kBlockScaleBytes = 2;
uint8_t stored_offset(QuantType type) { return type == QuantType::kQ8_0 ? 128 : 0; }

// From a full tile of rows of x the tile unit outruns VNNI; with fewer (decode, verify) it does not,
// since every block's int32 sums leave the tiles through memory for their f32 scaling, and that
// round trip costs what the tile saves. Measured on a Xeon with AMX, 2 threads, k = 1024, n = 4096,
// AMX over VNNI: 8 rows 0.86x (q8_0) and 0.78x (q4_0); 16 rows 1.13x and 1.03x; 64 rows 1.21x and
// 1.23x (docs/design.md, "AMX").
constexpr int64_t kAmxMinRows = 16;

linear_quant_detail::GroupsKernel select_variant(Isa isa, int64_t m) {
  if (isa >= Isa::kAmx && m >= kAmxMinRows) return linear_quant_detail::groups_amx;
  if (isa >= Isa::kAvx512 && cpu_has_avx512_vnni()) return linear_quant_detail::groups_avx512vnni;
  if (isa >= Isa::kAvx2) return linear_quant_detail::groups_avx2;
  return linear_quant_detail::groups_generic;
}

// Groups per chunk handed to a thread: 64 output rows.
constexpr int64_t kChunkGroups = 4;
// Below this many multiply-adds one thread does the call (as linear_small's kMinParallelWork).
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

}  // namespace

size_t quant_block_bytes(QuantType type) { return type == QuantType::kQ8_0 ? 34 : 18; }

size_t packed_quant_bytes(QuantType type, int64_t n, int64_t k) {
  check_shape(n, k);
  return static_cast<size_t>(n_groups(n) * (k / kQuantBlock) * group_block_bytes(type));
}

void pack_quant_rows(QuantType type, const void* rows, int64_t n, int64_t k, void* out) {
  check_shape(n, k);
  const int64_t blocks = k / kQuantBlock, block_bytes = static_cast<int64_t>(quant_block_bytes(type));
  const int64_t words = sub_groups(type), group_block = group_block_bytes(type);
  // Q8_0's int8 + 128 is a flip of each byte's top bit, done 4 bytes at a time.
  const uint32_t flip = stored_offset(type) != 0 ? 0x80808080u : 0u;
  const uint32_t padding = type == QuantType::kQ8_0 ? 0x80808080u : 0x88888888u;  // values that decode to 0
  const auto* src = static_cast<const uint8_t*>(rows);
  auto* dst = static_cast<uint8_t*>(out);
  // Groups are independent; a load packs a whole model this way, so the threads share it.
#pragma omp parallel for schedule(static) if (n * k >= kMinParallelWork && !omp_in_parallel())
  for (int64_t g = 0; g < n_groups(n); ++g)
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* gb = dst + (g * blocks + b) * group_block;
      for (int64_t lane = 0; lane < kQuantGroupRows; ++lane) {
        const int64_t row = g * kQuantGroupRows + lane;
        const uint8_t* block = row < n ? src + (row * blocks + b) * block_bytes : nullptr;
        // A padding row: zero scale, values that decode to 0.
        if (block) std::memcpy(gb + 2 * lane, block, kBlockScaleBytes);
        else std::memset(gb + 2 * lane, 0, kBlockScaleBytes);
        for (int64_t word = 0; word < words; ++word) {
          uint32_t v = padding;
          if (block) {
            std::memcpy(&v, block + kBlockScaleBytes + 4 * word, 4);
            v ^= flip;
          }
          std::memcpy(gb + packed_value_offset(lane, word, 0), &v, 4);
        }
      }
    }
}

void unpack_quant_row(QuantType type, const void* packed, int64_t n, int64_t k, int64_t row, void* out) {
  check_shape(n, k);
  DSPARK_ASSERT(row >= 0 && row < n);
  const int64_t blocks = k / kQuantBlock, block_bytes = static_cast<int64_t>(quant_block_bytes(type));
  const int64_t words = sub_groups(type), group_block = group_block_bytes(type);
  const uint8_t offset = stored_offset(type);
  const int64_t g = row / kQuantGroupRows, lane = row % kQuantGroupRows;
  const auto* src = static_cast<const uint8_t*>(packed);
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* gb = src + (g * blocks + b) * group_block;
    uint8_t* block = dst + b * block_bytes;
    std::memcpy(block, gb + 2 * lane, kBlockScaleBytes);
    for (int64_t word = 0; word < words; ++word)
      for (int64_t t = 0; t < 4; ++t)
        block[kBlockScaleBytes + 4 * word + t] = static_cast<uint8_t>(gb[packed_value_offset(lane, word, t)] - offset);
  }
}

void dequantize_packed_row(QuantType type, const void* packed, int64_t n, int64_t k, int64_t row, float* out) {
  std::vector<uint8_t> blocks(static_cast<size_t>(k / kQuantBlock) * quant_block_bytes(type));
  unpack_quant_row(type, packed, n, k, row, blocks.data());
  model::dequantize_row(type == QuantType::kQ8_0 ? model::GgmlType::kQ8_0 : model::GgmlType::kQ4_0, blocks.data(),
                        out, k);
}

void linear_quant(const float* x, int64_t m, int64_t k, const void* w, QuantType type, int64_t n, float* y,
                  int64_t ldy, bool accumulate) {
  check_shape(n, k);
  DSPARK_ASSERT(m >= 0 && ldy >= n);
  if (m == 0 || n == 0) return;
  DSPARK_ASSERT(x != nullptr && w != nullptr && y != nullptr);
  const int64_t blocks = k / kQuantBlock;
  // m * k bytes and 8 bytes per block of x, kept per thread across calls: a 64-row prefill piece's
  // would otherwise be a fresh mapping (and its page faults) on every call.
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd;
  thread_local std::vector<int32_t> xbias;
  xq.resize(static_cast<size_t>(m * k));
  xd.resize(static_cast<size_t>(m * blocks));
  xbias.resize(static_cast<size_t>(m * blocks));
  const int32_t offset = stored_offset(type) != 0 ? 128 : 8;
  const linear_quant_detail::QuantizeKernel quantize =
      current_isa() >= Isa::kAvx512 ? linear_quant_detail::quantize_avx512 : linear_quant_detail::quantize_generic;
  const linear_quant_detail::GroupsKernel kernel = select_variant(current_isa(), m);
  Problem p{nullptr, nullptr, nullptr, m, k, blocks, static_cast<const uint8_t*>(w), type, n, y, ldy, accumulate};
  if (kernel == linear_quant_detail::groups_avx512vnni) {
    // Block-major (Problem::xq_by_block): row i's blocks written m blocks apart.
    for (int64_t i = 0; i < m; ++i)
      quantize(x + i * k, blocks, offset, m, xq.data() + i * kQuantBlock, xd.data() + i, xbias.data() + i);
    p.xq_by_block = xq.data();
    p.xd_by_block = xd.data();
    p.xbias_by_block = xbias.data();
  } else {
    quantize(x, m * blocks, offset, 1, xq.data(), xd.data(), xbias.data());
    p.xq = xq.data();
    p.xd = xd.data();
    p.xbias = xbias.data();
  }
  const bool parallel = m * n * k >= kMinParallelWork && omp_get_max_threads() > 1 && !omp_in_parallel();
  if (!parallel) {
    kernel(p, 0, n_groups(n));
    return;
  }
  ColumnRuns runs(n_groups(n), kChunkGroups, omp_get_max_threads());
#pragma omp parallel
  {
    const int self = omp_get_thread_num();
    int64_t begin = 0, end = 0;
    while (runs.next(self, &begin, &end)) kernel(p, begin, end);
  }
}

}  // namespace dspark::kernels
