#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "sampling/sampling.h"

namespace dspark::sampling {
namespace {

torch::Tensor logits_of(const std::vector<double>& probs) {
  return torch::tensor(probs, torch::kFloat64).log().to(torch::kFloat32).unsqueeze(0);
}

std::vector<float> row(const torch::Tensor& t) {
  torch::Tensor c = t.squeeze(0).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

TEST(SamplingProbs, TemperatureOneIsSoftmax) {
  auto p = row(sampling_probs(logits_of({0.1, 0.2, 0.3, 0.4}), {}));
  EXPECT_NEAR(p[0], 0.1, 1e-6);
  EXPECT_NEAR(p[3], 0.4, 1e-6);
}

TEST(SamplingProbs, TemperatureSharpens) {
  SamplingParams params;
  params.temperature = 0.5;  // p^2 renormalised: 0.01, 0.04, 0.09, 0.16 / 0.30
  auto p = row(sampling_probs(logits_of({0.1, 0.2, 0.3, 0.4}), params));
  EXPECT_NEAR(p[0], 0.01 / 0.30, 1e-6);
  EXPECT_NEAR(p[3], 0.16 / 0.30, 1e-6);
}

TEST(SamplingProbs, TopKKeepsTheKMostLikely) {
  SamplingParams params;
  params.top_k = 2;
  auto p = row(sampling_probs(logits_of({0.1, 0.2, 0.3, 0.4}), params));
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_NEAR(p[2], 0.3 / 0.7, 1e-6);
  EXPECT_NEAR(p[3], 0.4 / 0.7, 1e-6);
}

TEST(SamplingProbs, TopPKeepsTheTokenThatCrossesTheThreshold) {
  SamplingParams params;
  params.top_p = 0.5;  // sorted 0.4, 0.3, ...: 0.4 < 0.5 so 0.3 is kept too
  auto p = row(sampling_probs(logits_of({0.1, 0.2, 0.3, 0.4}), params));
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_NEAR(p[2], 0.3 / 0.7, 1e-6);
  params.top_p = 0.4;  // exactly the top token's mass: only it is kept
  p = row(sampling_probs(logits_of({0.1, 0.2, 0.3, 0.4}), params));
  EXPECT_NEAR(p[3], 1.0, 1e-6);
  EXPECT_EQ(p[2], 0.0f);
}

TEST(SamplingProbs, MinPIsRelativeToTheTopToken) {
  SamplingParams params;
  params.min_p = 0.6;  // threshold 0.24: keeps 0.3 and 0.4
  auto p = row(sampling_probs(logits_of({0.1, 0.2, 0.3, 0.4}), params));
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_NEAR(p[2], 0.3 / 0.7, 1e-6);
}

TEST(SamplingProbs, GreedyIsOneHotAtTheFirstMaximum) {
  SamplingParams params;
  params.temperature = 0;
  auto p = row(sampling_probs(torch::tensor({1.0f, 3.0f, 3.0f, 2.0f}).unsqueeze(0), params));
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
}

// The first index of the largest value, NaNs skipped except at index 0 (the plain scan's
// answers), on 2,000 seeded rows of every length from 1 to 100 plus an 8k vocabulary: ties,
// -inf, NaNs and signed zeros drawn in.
// A positive temperature far below any useful one (1e-38 made every logit / T infinite and the
// softmax NaN) samples greedily, as in vLLM, on both paths; 1e-4 still samples.
TEST(SamplingProbs, VanishingTemperaturesAreGreedy) {
  const torch::Tensor logits = logits_of({0.1, 0.4, 0.3, 0.2});
  for (double t : {1e-38, 1e-45, 9e-6}) {
    const SamplingParams params{.temperature = t};
    EXPECT_TRUE(params.greedy()) << t;
    EXPECT_EQ(row(sampling_probs(logits, params)), (std::vector<float>{0, 1, 0, 0})) << t;
    EXPECT_EQ(row(sampling_probs_tensor_ops(logits, params)), (std::vector<float>{0, 1, 0, 0})) << t;
  }
  EXPECT_FALSE((SamplingParams{.temperature = 1e-4}).greedy());
}

// NaN logits (a broken checkpoint) fail the draw with an error, not an abort of the process.
TEST(SampleFromProbs, NoFiniteMassIsAnError) {
  const SamplingParams params{.temperature = 1.0};
  const torch::Tensor probs = sampling_probs(torch::full({1, 3}, NAN), params);
  Rng rng(1);
  EXPECT_THROW(sample_from_probs(probs.data_ptr<float>(), 3, rng), Error);
  const float zeros[3] = {0, 0, 0};
  EXPECT_THROW(sample_from_probs(zeros, 3, rng), Error);
}

// 2,000 random rows (lengths 1-100 and 8192) of NaN, -inf, signed zeros and small integers, so
// ties, NaNs at every index and rows with nothing finite all occur: argmax is the plain scan's
// first largest value with NaNs skipped, and a row with nothing above -inf is an Error.
TEST(Argmax, EqualsThePlainScanSkippingNaNs) {
  auto scan = [](const std::vector<float>& v) -> std::optional<int64_t> {
    std::optional<int64_t> best;
    for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i)
      if (v[i] > -INFINITY && (!best || v[i] > v[*best])) best = i;
    return best;
  };
  Rng rng(7);
  int nothing_finite = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t n = trial < 1990 ? 1 + trial % 100 : 8192;
    std::vector<float> v(n);
    for (float& x : v) {
      const double u = rng.uniform();
      x = u < 0.05 ? NAN : u < 0.1 ? -INFINITY : u < 0.15 ? -0.0f : u < 0.2 ? 0.0f : std::floor(static_cast<float>(rng.uniform()) * 8);
    }
    if (trial % 10 == 0) v[0] = NAN;
    SCOPED_TRACE("trial " + std::to_string(trial));
    const std::optional<int64_t> expected = scan(v);
    if (expected) {
      EXPECT_EQ(argmax(v.data(), n), *expected);
    } else {
      ++nothing_finite;
      EXPECT_THROW(argmax(v.data(), n), Error);
    }
  }
  EXPECT_GT(nothing_finite, 0);
  const std::vector<float> all_nan(300, NAN);
  EXPECT_THROW(argmax(all_nan.data(), 300), Error);
}

// The CPU row version (what drafters and the CPU verifier use) against the libtorch version (what
// other devices use) on random logits over a 5000-token vocabulary, every filter alone and
// together: the same support, probabilities within 1e-6. A filter applied in another order or
// off by one token changes the support or moves mass by far more.
TEST(SamplingProbs, RowVersionMatchesTheTensorOps) {
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({6, 5000}) * 3.0;
  auto params_with = [](double t, int64_t k, double p, double m) {
    SamplingParams s;
    s.temperature = t;
    s.top_k = k;
    s.top_p = p;
    s.min_p = m;
    return s;
  };
  for (const SamplingParams& params : {params_with(1.0, 0, 1.0, 0.0), params_with(0.7, 0, 1.0, 0.0),
                                       params_with(1.0, 40, 1.0, 0.0), params_with(1.0, 0, 0.9, 0.0),
                                       params_with(1.3, 0, 0.999, 0.0), params_with(1.0, 0, 1.0, 0.05),
                                       params_with(0.8, 200, 0.95, 0.01), params_with(0.0, 0, 1.0, 0.0)}) {
    SCOPED_TRACE("T=" + std::to_string(params.temperature) + " k=" + std::to_string(params.top_k) +
                 " p=" + std::to_string(params.top_p) + " min_p=" + std::to_string(params.min_p));
    const torch::Tensor want = sampling_probs_tensor_ops(logits, params);
    const torch::Tensor got = sampling_probs(logits, params);
    EXPECT_TRUE(torch::equal(got > 0, want > 0)) << "support differs";
    EXPECT_LT((got - want).abs().max().item<float>(), 1e-6);
    std::vector<float> one_row(5000);
    sampling_probs_row(logits[2].contiguous().data_ptr<float>(), 5000, params, one_row.data());
    EXPECT_TRUE(torch::equal(torch::from_blob(one_row.data(), {5000}), got[2])) << "row call differs from batch";
  }
}

// top_p = 0.999 over nearly flat logits keeps thousands of tokens: the partial sort must widen
// past its first 256 candidates and still cut at the right token.
TEST(SamplingProbs, TopPCutBeyondTheFirstCandidates) {
  const torch::Tensor logits = torch::linspace(0.0, 1.0, 4000).unsqueeze(0);
  SamplingParams params;
  params.top_p = 0.999;
  const torch::Tensor want = sampling_probs_tensor_ops(logits, params);
  const torch::Tensor got = sampling_probs(logits, params);
  const int64_t kept = (got > 0).sum().item<int64_t>();
  EXPECT_GT(kept, 1000);
  EXPECT_LT(kept, 4000);
  EXPECT_TRUE(torch::equal(got > 0, want > 0));
}

TEST(SamplingParamsCheck, RejectsBadValues) {
  SamplingParams params;
  params.top_p = 0;
  EXPECT_THROW(check_sampling_params(params), Error);
  params = {};
  params.top_k = -1;
  EXPECT_THROW(check_sampling_params(params), Error);
  params = {};
  params.min_p = 1.5;
  EXPECT_THROW(check_sampling_params(params), Error);
}

TEST(Rng, UniformIsInTheOpenUnitIntervalAndReproducible) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100000; ++i) {
    const double u = a.uniform();
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, b.uniform());
    differs |= u != c.uniform();
  }
  EXPECT_TRUE(differs);
}

// Chi-square goodness of fit of the categorical draw: n = 200000 draws over 4 categories with
// seed 7; statistic sum (obs - exp)^2 / exp over the 3 possible categories (2 degrees of freedom);
// threshold 18.4 (p = 1e-4).
TEST(SampleFromProbs, MatchesTheDistribution) {
  const std::vector<float> probs{0.1f, 0.0f, 0.6f, 0.3f};
  Rng rng(7);
  std::vector<int64_t> counts(4, 0);
  const int64_t n = 200000;
  for (int64_t i = 0; i < n; ++i) counts[sample_from_probs(probs.data(), 4, rng)]++;
  EXPECT_EQ(counts[1], 0);  // zero-probability tokens are never drawn
  double chi2 = 0;
  for (int k : {0, 2, 3}) {
    const double expected = probs[k] * n;
    chi2 += (counts[k] - expected) * (counts[k] - expected) / expected;
  }
  EXPECT_LT(chi2, 18.4);
}

}  // namespace
}  // namespace dspark::sampling
