// The Monte Carlo losslessness protocol shared by the single-request and batched engine tests.
// Target: random Qwen3, vocab 40, 3 layers, weights N(0, 0.35) so distributions are peaked and
// depend on the context. Sample size: DSPARK_MC_SAMPLES (default 20000 in CI; the full run uses
// 200000). Tests per case: chi-square of the marginal of tokens 1, 2, 3 and of the joint of tokens
// 1-2 (cells with expectation < 5 pooled). Threshold: p < 1e-4 / (number of tests over all cases),
// Bonferroni.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/model_init.h"
#include "model/transformer.h"
#include "sampling/sampling.h"
#include "stat_test.h"
#include "test_util.h"

namespace dspark::test {

inline int64_t mc_samples() {
  const char* env = std::getenv("DSPARK_MC_SAMPLES");
  return env ? std::atoll(env) : 20000;
}

constexpr int64_t kVocab = 40;
// Bonferroni over every Monte Carlo case of the suite: 5 single-request cases
// (test_speculative.cpp) and 2 batched-engine cases (test_batch_engine.cpp), 4 tests each.
constexpr int kCases = 7, kTestsPerCase = 4;
constexpr double kAlpha = 1e-4 / (kCases * kTestsPerCase);

inline model::Transformer make_mc_target(const test::TempDir& dir) {
  nlohmann::json j = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", kVocab},
                      {"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 3},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 8},
                      {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"max_position_embeddings", 256},
                      {"tie_word_embeddings", true}, {"initializer_range", 0.35}, {"torch_dtype", "float32"}};
  const model::ModelConfig config = model::ModelConfig::from_json(j, "mc target");
  model::write_random_checkpoint(config, (dir / "target").string(), {.seed = 11});
  return model::Transformer::load((dir / "target").string(), {model::WeightDType::kF32});
}

// Exact distributions of the first three tokens after `prompt` under `params`:
// p1[x1], p2[x1][x2], p3[x1][x2][x3] (each conditional on the earlier tokens).
struct ExactAr {
  std::vector<double> p1;
  std::vector<std::vector<double>> p2;
  std::vector<std::vector<std::vector<double>>> p3;
};

inline ExactAr exact_autoregressive(const model::Transformer& target, const std::vector<int64_t>& prompt,
                             const sampling::SamplingParams& params) {
  const int64_t n = static_cast<int64_t>(prompt.size()), V = kVocab;
  // Every continuation x1 x2 as one row: [V*V, n + 2]; logits at positions n-1, n, n+1.
  torch::Tensor ids = torch::empty({V * V, n + 2}, torch::kLong);
  for (int64_t a = 0; a < V; ++a)
    for (int64_t b = 0; b < V; ++b) {
      for (int64_t i = 0; i < n; ++i) ids[a * V + b][i] = prompt[i];
      ids[a * V + b][n] = a;
      ids[a * V + b][n + 1] = b;
    }
  torch::Tensor hidden = target.forward_sequences(ids.to(target.device())).final_hidden;
  auto probs_at = [&](int64_t pos) {  // [V*V, V] f64
    return sampling::sampling_probs(target.lm_head(hidden.select(1, pos)), params).to(torch::kFloat64).cpu().contiguous();
  };
  torch::Tensor q1 = probs_at(n - 1), q2 = probs_at(n), q3 = probs_at(n + 1);
  ExactAr e;
  e.p1.assign(q1[0].data_ptr<double>(), q1[0].data_ptr<double>() + V);
  e.p2.resize(V);
  e.p3.assign(V, std::vector<std::vector<double>>(V));
  for (int64_t a = 0; a < V; ++a) {
    e.p2[a].assign(q2[a * V].data_ptr<double>(), q2[a * V].data_ptr<double>() + V);
    for (int64_t b = 0; b < V; ++b) e.p3[a][b].assign(q3[a * V + b].data_ptr<double>(), q3[a * V + b].data_ptr<double>() + V);
  }
  return e;
}

// Chi-square tests of generated samples (each the first three tokens) against the exact
// autoregressive distributions: token 1, token 2, token 3, joint 1-2. A sample of another length
// fails the test it would have entered.
inline std::vector<ChiSquare> first_three_tokens_tests(const ExactAr& exact, const std::vector<std::vector<int64_t>>& samples) {
  const int64_t V = kVocab;
  std::vector<int64_t> c1(V), c2(V), c3(V), c12(V * V);
  for (const std::vector<int64_t>& ids : samples) {
    EXPECT_EQ(ids.size(), 3u);
    if (ids.size() != 3) continue;
    ++c1[ids[0]];
    ++c2[ids[1]];
    ++c3[ids[2]];
    ++c12[ids[0] * V + ids[1]];
  }
  std::vector<double> m2(V), m3(V), j12(V * V);
  for (int64_t a = 0; a < V; ++a)
    for (int64_t b = 0; b < V; ++b) {
      const double pab = exact.p1[a] * exact.p2[a][b];
      j12[a * V + b] = pab;
      m2[b] += pab;
      for (int64_t c = 0; c < V; ++c) m3[c] += pab * exact.p3[a][b][c];
    }
  return {chi_square(c1, exact.p1), chi_square(c2, m2), chi_square(c3, m3), chi_square(c12, j12)};
}

}  // namespace dspark::test
