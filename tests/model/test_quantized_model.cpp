// A model loaded with quantized weights (--dtype q8_0 / q4_0): every matrix, the embedding and
// the LM head held in llama.cpp's blocks; logits within the formats' error of the f32 model's; a
// token's logits the same whatever else is in its batch (so speculative verification stays exact
// against the quantized model); the memory it holds; and what it refuses.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "forward_test_util.h"
#include "model/kernels/linear_quant.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dspark::model {
namespace {

using test::fixture;

std::vector<int64_t> ids_from(int64_t n, int64_t start, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((start + 7 * i) % vocab);
  return ids;
}

double relative_rms(const torch::Tensor& got, const torch::Tensor& expected) {
  return torch::sqrt((got - expected).pow(2).mean() / expected.pow(2).mean()).item<double>();
}

struct QuantCase {
  const char* fixture_name;
  WeightDType dtype;
  double max_rms;  // logits' relative RMS error against the f32 model
};

class QuantizedModel : public ::testing::TestWithParam<QuantCase> {};

// Relative RMS error of all logits of a 40-token prompt against f32 weights: measured on these
// random fixtures (whose logits are small and cancel, so errors carry through the layers
// undamped) 3.1% / 2.6% for q8_0 and 34% / 32% for q4_0, untied / tied; the bounds are about
// twice that, below the errors of order 1 that a wrong scale or a block from the wrong row gives.
TEST_P(QuantizedModel, LogitsStayWithinTheFormatsError) {
  torch::NoGradGuard no_grad;
  const QuantCase& c = GetParam();
  Transformer f32 = Transformer::load(fixture(c.fixture_name).string(), {.weight_dtype = WeightDType::kF32});
  Transformer quant = Transformer::load(fixture(c.fixture_name).string(), {.weight_dtype = c.dtype});
  EXPECT_EQ(quant.weight_dtype(), c.dtype);
  const std::vector<int64_t> ids = ids_from(40, 5, f32.config().vocab_size);
  const torch::Tensor expected = test::all_logits(f32, ids);
  const torch::Tensor got = test::all_logits(quant, ids);
  const double rms = relative_rms(got, expected);
  std::printf("%s %s: relative RMS error of the logits %.4f\n", c.fixture_name,
              c.dtype == WeightDType::kQ8_0 ? "q8_0" : "q4_0", rms);
  EXPECT_LT(rms, c.max_rms);
  EXPECT_GT(rms, 1e-4);  // the weights really are quantized
}

// A prompt prefilled in one forward (pieces of 64 rows) gives every position the logits that
// decoding it token by token gives, bit for bit, and a ragged batch of sequences gives each the
// logits it gets alone: the quantized kernel computes each row on its own.
TEST_P(QuantizedModel, RowsDoNotDependOnTheirBatch) {
  torch::NoGradGuard no_grad;
  const QuantCase& c = GetParam();
  Transformer model = Transformer::load(fixture(c.fixture_name).string(), {.weight_dtype = c.dtype});
  const std::vector<int64_t> ids = ids_from(90, 3, model.config().vocab_size);
  const torch::Tensor prefilled = test::all_logits(model, ids);
  KvCache cache = model.make_cache(1, 128);
  const int64_t slot = *cache.allocate();
  for (size_t i = 0; i < ids.size(); ++i) {
    const torch::Tensor step = model.decode(cache, {slot}, {ids[i]});
    ASSERT_TRUE(torch::equal(step[0], prefilled[static_cast<int64_t>(i)])) << "position " << i;
  }
}

// What the weights hold: the packed blocks (34 or 18 bytes per 32 values, rows padded to 16) of
// every matrix, one table for a tied embedding and head, plus the f32 norms.
TEST_P(QuantizedModel, HoldsTheBlocksOnly) {
  const QuantCase& c = GetParam();
  Transformer model = Transformer::load(fixture(c.fixture_name).string(), {.weight_dtype = c.dtype});
  const ModelConfig& k = model.config();
  const auto type = c.dtype == WeightDType::kQ8_0 ? kernels::QuantType::kQ8_0 : kernels::QuantType::kQ4_0;
  const int64_t q_dim = k.n_heads * k.head_dim, kv_dim = k.n_kv_heads * k.head_dim;
  auto packed = [&](int64_t n, int64_t in) { return static_cast<int64_t>(kernels::packed_quant_bytes(type, n, in)); };
  int64_t expected = packed(k.vocab_size, k.hidden_size) * (k.tie_word_embeddings ? 1 : 2) + 4 * k.hidden_size;
  const int64_t norms = 4 * (2 * k.hidden_size + (k.qk_norm ? 2 * k.head_dim : 0));
  expected += k.n_layers * (packed(q_dim + 2 * kv_dim, k.hidden_size) + packed(k.hidden_size, q_dim) +
                            packed(2 * k.intermediate_size, k.hidden_size) +
                            packed(k.hidden_size, k.intermediate_size) + norms);
  EXPECT_EQ(model.weight_bytes(), expected);
  // The embedding reads its rows from the blocks.
  const torch::Tensor table = model.embedding();
  EXPECT_EQ(table.sizes(), torch::IntArrayRef({k.vocab_size, k.hidden_size}));
  EXPECT_GT(table.abs().sum().item<double>(), 0);
}

TEST_P(QuantizedModel, CannotBeTrainedOrSaved) {
  Transformer model = Transformer::load(fixture(GetParam().fixture_name).string(), {.weight_dtype = GetParam().dtype});
  EXPECT_THROW(model.named_parameters(), Error);
  test::TempDir dir;
  EXPECT_THROW(model.save((dir / "out").string(), WeightDType::kBF16), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, QuantizedModel,
    ::testing::Values(QuantCase{"tiny-qwen3-untied", WeightDType::kQ8_0, 0.07},
                      QuantCase{"tiny-qwen3-untied", WeightDType::kQ4_0, 0.7},
                      QuantCase{"tiny-qwen3-tied", WeightDType::kQ8_0, 0.07},
                      QuantCase{"tiny-qwen3-tied", WeightDType::kQ4_0, 0.7}),
    [](const auto& info) {
      return std::string(info.param.fixture_name[11] == 'u' ? "Untied" : "Tied") +
             (info.param.dtype == WeightDType::kQ8_0 ? "Q8_0" : "Q4_0");
    });

}  // namespace
}  // namespace dspark::model
