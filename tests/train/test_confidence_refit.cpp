// Refitting the confidence head on rollouts: the Newton fit recovers a logistic model exactly and
// weighs examples as eq. 11 does; the recorder captures the very inputs the head scored while
// drafting (its raw confidences recomputed from them match the engine's rounds).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "bench/accept_bench.h"
#include "common/error.h"
#include "draft/dspark_drafter.h"
#include "tokenizer/tokenizer.h"
#include "train/confidence_refit.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;

// Soft labels drawn exactly from a logistic model: the unpenalised fit must return its parameters
// (20,000 examples, 6 features, fixed seed; tolerance 1e-4 on every coefficient).
TEST(ConfidenceFit, RecoversTheLogisticModelItsTargetsCameFrom) {
  at::Generator gen = at::detail::createCPUGenerator(7);
  const int64_t n = 20000;
  const torch::Tensor x = torch::randn({n, 6}, gen, torch::kFloat64);
  const torch::Tensor w = torch::tensor({0.8, -1.5, 0.3, 0.0, 2.0, -0.4}, torch::kFloat64);
  const double b = -0.7;
  train::ConfidenceExamples e{x, torch::sigmoid(x.mv(w) + b), torch::exp(-torch::arange(n, torch::kFloat64) % 7 / 7.0),
                              torch::arange(n, torch::kInt64) % 7};
  const train::ConfidenceFit fit = train::fit_confidence_head(e, 0.0);
  ASSERT_EQ(fit.weight.sizes(), (std::vector<int64_t>{1, 6}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_NEAR(fit.weight[0][i].item<double>(), w[i].item<double>(), 1e-4) << i;
  EXPECT_NEAR(fit.bias.item<double>(), b, 1e-4);
  EXPECT_LT(fit.iterations, 50);
  // The objective at the fit is the targets' own entropy term, the minimum of soft-label BCE.
  EXPECT_NEAR(fit.loss, train::weighted_soft_bce(x.mv(w) + b, e), 1e-9);
}

// Two groups with the same input and targets 0.2 (weight 3) and 0.8 (weight 1): the fitted
// probability is their weighted mean, 0.35, so sigmoid(b) = 0.35 and w stays 0 under l2.
TEST(ConfidenceFit, WeighsExamplesByTheirPositionWeight) {
  const torch::Tensor x = torch::zeros({4, 2}, torch::kFloat64);
  const torch::Tensor target = torch::tensor({0.2, 0.2, 0.8, 0.8}, torch::kFloat64);
  const torch::Tensor weight = torch::tensor({3.0, 3.0, 1.0, 1.0}, torch::kFloat64);
  const train::ConfidenceFit fit = train::fit_confidence_head({x, target, weight, torch::zeros({4}, torch::kInt64)}, 1e-3);
  EXPECT_NEAR(1.0 / (1.0 + std::exp(-fit.bias.item<double>())), 0.35, 1e-6);
  EXPECT_NEAR(fit.weight.abs().max().item<double>(), 0.0, 1e-9);
}

TEST(ConfidenceFit, NoExamplesIsAnError) {
  const train::ConfidenceExamples empty{torch::zeros({0, 3}, torch::kFloat64), torch::zeros({0}, torch::kFloat64),
                                        torch::zeros({0}, torch::kFloat64), torch::zeros({0}, torch::kInt64)};
  EXPECT_THROW(train::fit_confidence_head(empty, 1e-4), Error);
}

// Real rollouts of the tiny pair (2 prompts, T = 1, gamma 7, 24 new tokens): one record per round,
// the anchor as slot 0's previous token, 1 - TV in [0, 1] exactly where the slot was verified, and
// the head applied to the recorded [h_k ; W1[x_{k-1}]] gives back the confidences the drafter
// reported (raw: no STS), to 1e-5.
TEST(RolloutRecorder, RecordsWhatTheHeadScoredInEachRound) {
  const std::string target_dir = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();
  model::Transformer target = model::Transformer::load(target_dir);
  auto drafter = draft::DSparkDrafter::load((fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l-dspark").string(),
                                            target, {.max_slots = 1, .capacity = 1024});
  drafter->set_confidence_temperatures({});
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(target_dir);
  train::RolloutRecorder recorder(*drafter);
  const bench::AcceptResult result =
      bench::run_accept(target, recorder, tok, target_dir, {"What is the capital of France?", "Write a haiku about rain."},
                        {.temperature = 1.0, .gamma = 7, .max_tokens = 24, .seed = 5});
  // The last token of a request is a step without drafts: a round with no confidences, not recorded.
  std::vector<engine::DraftRound> drafted;
  for (const engine::DraftRound& round : result.rounds)
    if (!round.confidence.empty()) drafted.push_back(round);
  ASSERT_GE(drafted.size(), 2u);
  const train::ConfidenceRollouts r = recorder.take(result.rounds, 7);
  ASSERT_EQ(r.exact.size(0), static_cast<int64_t>(drafted.size()));
  const torch::Tensor w1 = drafter->network().markov().w1();
  const int64_t d = drafter->config().backbone.hidden_size;
  for (int64_t i = 0; i < r.exact.size(0); ++i) {
    const engine::DraftRound& round = drafted[i];
    EXPECT_EQ(r.accepted[i].item<int64_t>(), round.accepted);
    for (int64_t k = 0; k < 7; ++k) {
      const float e = r.exact[i][k].item<float>();
      if (k < round.verified) {
        EXPECT_GE(e, 0.0f);
        EXPECT_LE(e, 1.0f + 1e-6f);
      } else {
        EXPECT_TRUE(std::isnan(e)) << i << " " << k;
      }
    }
    const int64_t n = static_cast<int64_t>(round.confidence.size());
    const torch::Tensor logits = drafter->network().confidence().block(
        r.hidden[i].narrow(0, 0, n).reshape({n, d}), w1.index_select(0, r.prev[i].narrow(0, 0, n)));
    for (int64_t k = 0; k < n; ++k)
      EXPECT_NEAR(torch::sigmoid(logits[k]).item<float>(), round.confidence[k], 1e-5) << i << " " << k;
  }
  // A second take has nothing left to pair with the rounds.
  EXPECT_THROW(recorder.take(result.rounds, 7), Error);
  EXPECT_EQ(recorder.take({}, 7).exact.size(0), 0);
  // The examples are the verified slots only, with eq. 11's position weights.
  const train::ConfidenceExamples e = train::confidence_examples(r, w1);
  EXPECT_EQ(e.x.size(0), torch::isfinite(r.exact).sum().item<int64_t>());
  EXPECT_EQ(e.x.size(1), d + w1.size(1));
  EXPECT_NEAR(e.weight[0].item<double>(), 1.0, 1e-12);  // slot 0 of round 0
}

}  // namespace
}  // namespace dspark
