// QuantizedWeight::from_parts: a matrix stacked from several block arrays (q, k and v of a GGUF
// file, packed from where the file maps them) holds the same packed bytes as one array of all
// their rows, whether the parts fill whole 16-row groups (packed in place) or not (gathered first).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "model/quantized_weight.h"

namespace dspark::model {
namespace {

using kernels::QuantType;

std::vector<uint8_t> random_blocks(QuantType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols / kernels::kQuantBlock) * kernels::quant_block_bytes(type));
  std::mt19937 rng(seed);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

void expect_same_packing(QuantType type, const std::vector<int64_t>& part_rows) {
  const int64_t cols = 64;
  const size_t row_bytes = static_cast<size_t>(cols / kernels::kQuantBlock) * kernels::quant_block_bytes(type);
  std::vector<std::vector<uint8_t>> parts;
  std::vector<QuantizedWeight::Part> views;
  std::vector<uint8_t> all;
  for (size_t i = 0; i < part_rows.size(); ++i) {
    parts.push_back(random_blocks(type, part_rows[i], cols, 11 + static_cast<uint32_t>(i)));
    all.insert(all.end(), parts.back().begin(), parts.back().end());
  }
  for (size_t i = 0; i < parts.size(); ++i) views.push_back({parts[i].data(), part_rows[i]});
  const int64_t rows = static_cast<int64_t>(all.size() / row_bytes);
  const QuantizedWeight stacked = QuantizedWeight::from_parts(views, cols, type);
  const QuantizedWeight whole = QuantizedWeight::from_blocks(all.data(), rows, cols, type);
  ASSERT_EQ(stacked.n_out, rows);
  ASSERT_EQ(stacked.bytes(), whole.bytes());
  EXPECT_EQ(0, std::memcmp(stacked.packed.data_ptr(), whole.packed.data_ptr(), static_cast<size_t>(whole.bytes())));
  // And the packing is lossless: every row unpacks to its blocks.
  std::vector<uint8_t> row(row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::unpack_quant_row(type, stacked.packed.data_ptr(), rows, cols, r, row.data());
    EXPECT_EQ(0, std::memcmp(row.data(), all.data() + r * row_bytes, row_bytes)) << "row " << r;
  }
}

TEST(QuantizedWeight, PartsInWholeGroupsPackInPlaceAsOneArray) {
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0}) expect_same_packing(type, {32, 16, 20});
}

TEST(QuantizedWeight, PartsOfPartialGroupsAreGatheredFirst) {
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0}) expect_same_packing(type, {5, 20, 3});
}

// A drafter's context K/V projection is the k and v rows of its fused q/k/v matrix: row_range
// must hand back those rows' blocks unchanged, wherever the range starts in the 16-row groups.
TEST(QuantizedWeight, RowRangeHoldsTheSameBlocks) {
  const int64_t rows = 53, cols = 96;
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0}) {
    const std::vector<uint8_t> blocks = random_blocks(type, rows, cols, 5);
    const QuantizedWeight whole = QuantizedWeight::from_blocks(blocks.data(), rows, cols, type);
    const size_t row_bytes = static_cast<size_t>(cols / kernels::kQuantBlock) * kernels::quant_block_bytes(type);
    for (auto [begin, n] : {std::pair<int64_t, int64_t>{16, 32}, {7, 30}, {40, 13}, {0, rows}}) {
      const QuantizedWeight part = whole.row_range(begin, n);
      ASSERT_EQ(part.n_out, n);
      ASSERT_EQ(part.n_in, cols);
      std::vector<uint8_t> row(row_bytes);
      for (int64_t r = 0; r < n; ++r) {
        kernels::unpack_quant_row(type, part.packed.data_ptr(), n, cols, r, row.data());
        EXPECT_EQ(0, std::memcmp(row.data(), blocks.data() + (begin + r) * row_bytes, row_bytes))
            << "rows " << begin << " + " << r;
      }
    }
  }
}

}  // namespace
}  // namespace dspark::model
