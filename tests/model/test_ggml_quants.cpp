// llama.cpp's block formats: our reference quantization gives exactly llama-quantize's bytes on the
// fixture weights, and quantize -> dequantize round trips stay within each format's step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gguf_test_util.h"
#include "model/ggml_quants.h"
#include "model/safetensors.h"

namespace dspark::model {
namespace {

using test::gguf_fixture;

// Quantizing every matrix of `f32_file` to `type` reproduces the tensor bytes of `quantized_file`.
void expect_same_bytes(const std::string& f32_file, const std::string& quantized_file, GgmlType type) {
  const GgufFile source = GgufFile::open(gguf_fixture(f32_file).string());
  const GgufFile reference = GgufFile::open(gguf_fixture(quantized_file).string());
  int n_matrices = 0;
  for (const GgufTensorInfo& t : source.tensors()) {
    if (t.ne.size() != 2) continue;
    const GgufTensorInfo& ref = reference.tensor(t.name, t.ne);
    ASSERT_EQ(ref.type, type) << t.name;
    const std::vector<float> values = source.read_f32(t);
    std::vector<uint8_t> ours(ggml_row_bytes(type, t.numel()));
    quantize_row(type, values.data(), ours.data(), t.numel());
    ASSERT_EQ(ours.size(), ref.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(ours.data(), ref.data, ref.n_bytes), 0) << quantized_file << " " << t.name;
    ++n_matrices;
  }
  EXPECT_EQ(n_matrices, 2 + 3 * 7);  // embeddings, head, 7 per layer
}

TEST(GgmlQuants, Q8_0OfF32FixtureEqualsLlamaQuantizeBytes) {
  expect_same_bytes("untied-f32.gguf", "untied-q8_0.gguf", GgmlType::kQ8_0);
}

TEST(GgmlQuants, Q4_0OfF32FixtureEqualsLlamaQuantizeBytes) {
  expect_same_bytes("untied-f32.gguf", "untied-q4_0.gguf", GgmlType::kQ4_0);
}

// Random rows (seed 7, 64 blocks of 32 values each, normal(0, 1), an all-zero block and a
// constant block): |dequantize(quantize(x)) - x| <= (h + q_max 2^-11) d for every value, where d is
// the block's step (Q8_0: max|x| / 127, Q4_0: max|x| / 8), q_max 2^-11 d bounds the f16 rounding
// of d times the largest quant (127, 8), and h is 0.5 (round to nearest) for Q8_0 but 1 for Q4_0,
// whose positive end is clamped at +7 when the block's largest magnitude is negative. F16 and BF16
// round trips are exact on values they represent.
TEST(GgmlQuants, RoundTripsStayWithinTheirStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 64 * 32;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  for (int64_t j = 0; j < 32; ++j) x[j] = 0.0f;       // an all-zero block: d = 0
  for (int64_t j = 32; j < 64; ++j) x[j] = 0.25f;     // a constant block
  for (const GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    std::vector<uint8_t> q(ggml_row_bytes(type, n));
    quantize_row(type, x.data(), q.data(), n);
    std::vector<float> y(n);
    dequantize_row(type, q.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      const bool q8 = type == GgmlType::kQ8_0;
      const float step = amax / (q8 ? 127.0f : 8.0f);
      const float bound = ((q8 ? 0.5f : 1.0f) + (q8 ? 127.0f : 8.0f) / 2048.0f) * step * 1.0001f;
      for (int64_t j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), bound)
            << ggml_type_name(type) << " block " << b << " value " << j;
    }
    for (int64_t j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.0f);
  }
  for (const GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    std::vector<float> exact(n);
    for (int64_t i = 0; i < n; ++i) exact[i] = std::ldexp(static_cast<float>(i % 255 - 127), static_cast<int>(i % 9) - 4);
    std::vector<uint8_t> q(ggml_row_bytes(type, n));
    quantize_row(type, exact.data(), q.data(), n);
    std::vector<float> y(n);
    dequantize_row(type, q.data(), y.data(), n);
    EXPECT_EQ(std::memcmp(y.data(), exact.data(), n * sizeof(float)), 0) << ggml_type_name(type);
  }
}

// Q5_K (no fixture file holds it): a hand-made block. d = 1, dmin = 0.5; every sub-block has
// scale 1 and min 2 (so each value is q - 1); qs[l] = l % 16 in the low nibble, 15 - l % 16 in the
// high; qh = 0x55 sets the fifth bit of each group's first 32 values and not of its second 32.
TEST(GgmlQuants, Q5_KHandMadeBlock) {
  std::vector<uint8_t> block(176, 0);
  block[0] = 0x00; block[1] = 0x3c;  // d = 1.0 (f16)
  block[2] = 0x00; block[3] = 0x38;  // dmin = 0.5
  uint8_t* scales = block.data() + 4;
  for (int j = 0; j < 4; ++j) scales[j] = 1, scales[j + 4] = 2;  // sub-blocks 0-3: scale 1, min 2
  for (int j = 8; j < 12; ++j) scales[j] = 0x21;                  // sub-blocks 4-7: scale 1, min 2
  for (int l = 0; l < 32; ++l) block[16 + l] = 0x55;
  for (int l = 0; l < 128; ++l) block[48 + l] = static_cast<uint8_t>((l % 16) | ((15 - l % 16) << 4));
  std::vector<float> y(256);
  dequantize_row(GgmlType::kQ5_K, block.data(), y.data(), 256);
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(y[g * 64 + l], static_cast<float>(l % 16 + 16 - 1)) << g << " " << l;
      EXPECT_EQ(y[g * 64 + 32 + l], static_cast<float>(15 - l % 16 - 1)) << g << " " << l;
    }
}

TEST(GgmlQuants, TypeTableAndNames) {
  EXPECT_EQ(ggml_type_info(12)->block_bytes, 144u);  // Q4_K
  EXPECT_EQ(ggml_type_info(14)->block_bytes, 210u);  // Q6_K
  EXPECT_FALSE(ggml_type_info(4).has_value());       // removed Q4_2
  EXPECT_EQ(parse_ggml_type("q4_0"), GgmlType::kQ4_0);
  EXPECT_EQ(parse_ggml_type("BF16"), GgmlType::kBF16);
  EXPECT_FALSE(parse_ggml_type("q4_k").has_value());
  EXPECT_TRUE(can_dequantize(GgmlType::kQ5_K));
  EXPECT_FALSE(can_dequantize(GgmlType::kQ5_0));
}

}  // namespace
}  // namespace dspark::model
