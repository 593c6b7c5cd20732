// Growing a model: the grown model computes the small one's logits, training tells the copies of
// the widened stream apart, and shapes that cannot be grown are refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "model/model_grow.h"
#include "model/model_init.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dspark::model {
namespace {

nlohmann::json qwen3_json(int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t intermediate,
                          bool tied) {
  return {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", 96},
          {"hidden_size", hidden}, {"intermediate_size", intermediate}, {"num_hidden_layers", layers},
          {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads}, {"head_dim", 16},
          {"rms_norm_eps", 1e-6}, {"rope_theta", 1e6}, {"max_position_embeddings", 64},
          {"tie_word_embeddings", tied}, {"torch_dtype", "float32"}};
}

// A small f32 model whose norm weights are random too (all-ones norms would hide a misplaced copy).
void write_small(const std::string& dir, bool tied) {
  const ModelConfig c = ModelConfig::from_json(qwen3_json(3, 32, 2, 1, 48, tied), "small");
  InitialWeights w = random_weights(c, 7);
  torch::manual_seed(3);
  for (auto& [spec, t] : w)
    if (spec.is_norm) t = 1 + 0.3 * torch::randn(spec.shape);
  write_checkpoint(c, dir, w, {});
}

// The small model in small_dir grown into big_json's shape, written to big_dir and loaded (f32).
Transformer grow(const std::string& small_dir, const nlohmann::json& big_json, const std::string& big_dir) {
  const ModelConfig big = ModelConfig::from_json(big_json, "big");
  write_checkpoint(big, big_dir, grown_weights(small_dir, big, 11), {});
  return Transformer::load(big_dir, {.weight_dtype = WeightDType::kF32});
}

torch::Tensor logits(const Transformer& m, const torch::Tensor& ids) {  // ids [b, t] -> [b, t, vocab]
  return m.lm_head(m.forward_sequences(ids).final_hidden);
}

class GrowModel : public ::testing::TestWithParam<bool> {};  // tied embeddings?

// 3 layers of width 32 with 2 heads / 1 KV head / 48 neurons, grown into 7 layers of width 96 with
// 6 / 3 / 160: every logit of 2 sequences of 12 random tokens within 1e-4 of the small model's.
TEST_P(GrowModel, TheGrownModelComputesTheSmallOnesLogits) {
  torch::NoGradGuard no_grad;
  test::TempDir small_dir, big_dir;
  write_small(small_dir.str(), GetParam());
  const Transformer grown = grow(small_dir.str(), qwen3_json(7, 96, 6, 3, 160, GetParam()), big_dir.str());
  const Transformer small = Transformer::load(small_dir.str(), {.weight_dtype = WeightDType::kF32});
  ASSERT_EQ(grown.config().hidden_size, 96);
  torch::manual_seed(5);
  const torch::Tensor ids = torch::randint(0, 96, {2, 12}, torch::kInt64);
  const torch::Tensor expected = logits(small, ids);
  EXPECT_GT(expected.abs().max().item<double>(), 0.1);  // not a vanishing signal
  EXPECT_LE((logits(grown, ids) - expected).abs().max().item<double>(), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Embeddings, GrowModel, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Tied" : "Untied"; });

// The copies of a residual feature start equal, and so do their gradients: the new heads, neurons
// and layers, whose readers differ per copy, write nothing yet (zero output columns). One step
// later those columns are nonzero, and the copies' gradients differ (else training could never use
// the extra width).
TEST(GrowModelTraining, AfterOneStepGradientsTellTheCopiesOfTheStreamApart) {
  test::TempDir small_dir, big_dir;
  write_small(small_dir.str(), true);
  Transformer grown = grow(small_dir.str(), qwen3_json(4, 64, 4, 2, 96, true), big_dir.str());
  grown.set_requires_grad(true);
  torch::manual_seed(5);
  const torch::Tensor ids = torch::randint(0, 96, {2, 12}, torch::kInt64);
  // [vocab, 32] x 2 copies: the largest difference between the copies' gradients, relative to the
  // largest gradient.
  auto copies_differ = [&] {
    for (auto& [name, p] : grown.named_parameters())
      if (p.grad().defined()) p.mutable_grad().zero_();
    torch::Tensor l = logits(grown, ids).reshape({-1, 96}).slice(0, 0, -1);
    torch::nn::functional::cross_entropy(l, ids.reshape({-1}).slice(0, 1)).backward();
    const torch::Tensor grad = grown.embedding().grad();
    return ((grad.slice(1, 0, 32) - grad.slice(1, 32, 64)).abs().max() / grad.abs().max()).item<double>();
  };
  EXPECT_LT(copies_differ(), 1e-3);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : grown.named_parameters()) p.sub_(0.05 * p.grad());
  }
  EXPECT_GT(copies_differ(), 1e-2);
}

TEST(GrowModelRefuses, ShapesThatCannotHoldTheSmallModel) {
  test::TempDir small_dir;
  write_small(small_dir.str(), true);
  auto grow = [&](const nlohmann::json& j) {
    return [&small_dir, j] { grown_weights(small_dir.str(), ModelConfig::from_json(j, "big"), 0); };
  };
  test::expect_error(grow(qwen3_json(4, 48, 4, 2, 96, true)), {small_dir.str(), "not a multiple of 32"});
  test::expect_error(grow(qwen3_json(2, 64, 4, 2, 96, true)), {"fewer layers"});
  test::expect_error(grow(qwen3_json(4, 64, 4, 1, 96, true)), {"heads per KV head"});
  test::expect_error(grow(qwen3_json(4, 64, 4, 2, 96, false)), {"ties its embeddings"});
}

}  // namespace
}  // namespace dspark::model
