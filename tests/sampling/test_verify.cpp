// The engine's accept/resample step (sampling/verify.h) on crafted logits: greedy matching (perfect
// match, early mismatch, empty draft), the sampled path's extremes (q = p accepts everything; a
// draft the target gives probability 0 is always rejected and never re-emitted), the verifier seam,
// and draw_token.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "sampling/verify.h"

namespace dspark::sampling {
namespace {

constexpr int64_t kVocab = 12;

// [rows, kVocab] logits whose row i peaks at argmax[i].
torch::Tensor peaked_logits(const std::vector<int64_t>& argmax) {
  torch::Tensor logits = torch::zeros({static_cast<int64_t>(argmax.size()), kVocab});
  for (size_t i = 0; i < argmax.size(); ++i) logits[static_cast<int64_t>(i)][argmax[i]] = 5.0;
  return logits;
}

TEST(VerifyDrafts, GreedyAcceptsWhileDraftsMatchTheTargetArgmax) {
  const torch::Tensor logits = peaked_logits({5, 7, 2, 9});
  const SamplingParams greedy{.temperature = 0};
  Rng rng(1);
  const std::vector<int64_t> all = {5, 7, 2}, early = {5, 8, 2}, first = {4, 7, 2};
  VerifyOutcome o = verify_drafts(logits, all, torch::Tensor(), greedy, rng);
  EXPECT_EQ(o.n_accepted, 3);
  EXPECT_EQ(o.next_token, 9);  // the bonus token
  o = verify_drafts(logits, early, torch::Tensor(), greedy, rng);
  EXPECT_EQ(o.n_accepted, 1);
  EXPECT_EQ(o.next_token, 7);  // the target's token where the draft went wrong
  o = verify_drafts(logits, first, torch::Tensor(), greedy, rng);
  EXPECT_EQ(o.n_accepted, 0);
  EXPECT_EQ(o.next_token, 5);
  o = verify_drafts(logits.narrow(0, 0, 1), std::span<const int64_t>(), torch::Tensor(), greedy, rng);
  EXPECT_EQ(o.n_accepted, 0);
  EXPECT_EQ(o.next_token, 5);
  EXPECT_EQ(rng.counter(), 0u);  // greedy draws nothing
}

// q = p: min(1, p/q) = 1, so every draft is accepted, on every seed (200 seeds).
TEST(VerifyDrafts, SampledAcceptsEveryDraftWhenTheDrafterIsTheTarget) {
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({4, kVocab});
  const SamplingParams params{.temperature = 0.8, .top_k = 6};
  const torch::Tensor q = sampling_probs(logits.narrow(0, 0, 3), params);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(seed);
    std::vector<int64_t> drafts;
    for (int64_t k = 0; k < 3; ++k) drafts.push_back(sample_from_probs(q[k].contiguous().data_ptr<float>(), kVocab, rng));
    const VerifyOutcome o = verify_drafts(logits, drafts, q, params, rng);
    EXPECT_EQ(o.n_accepted, 3) << "seed " << seed;
    EXPECT_GT(q[0][0].item<float>() + 1, 0);  // keeps q alive across the loop
  }
}

// The drafter proposes token 0 with certainty where the target gives it probability 0 (top-k cuts
// it): rejected at slot 0 every time, and the residual draw never returns it (500 seeds).
TEST(VerifyDrafts, SampledRejectsADraftTheTargetCannotEmit) {
  torch::Tensor logits = torch::zeros({2, kVocab});
  logits.index_put_({torch::indexing::Slice(), 0}, -10.0);
  const SamplingParams params{.temperature = 1.0, .top_k = 4};
  torch::Tensor q = torch::zeros({1, kVocab});
  q[0][0] = 1.0;
  const std::vector<int64_t> drafts = {0};
  for (uint64_t seed = 0; seed < 500; ++seed) {
    Rng rng(seed);
    const VerifyOutcome o = verify_drafts(logits, drafts, q, params, rng);
    EXPECT_EQ(o.n_accepted, 0);
    EXPECT_NE(o.next_token, 0);
  }
}

TEST(VerifyDrafts, SampledModeGoesThroughTheGivenVerifier) {
  const torch::Tensor logits = peaked_logits({1, 2});
  const torch::Tensor q = sampling_probs(logits.narrow(0, 0, 1), {.temperature = 1.0});
  int64_t seen_vocab = 0;
  const SampledVerifier verifier = [&](std::span<const float> p, std::span<const float> qs, std::span<const int64_t> d,
                                       int64_t vocab, Rng&) {
    seen_vocab = vocab;
    EXPECT_EQ(p.size(), 2u * kVocab);
    EXPECT_EQ(qs.size(), 1u * kVocab);
    EXPECT_EQ(d.size(), 1u);
    return VerifyOutcome{0, 11};
  };
  Rng rng(0);
  const std::vector<int64_t> drafts = {1};
  EXPECT_EQ(verify_drafts(logits, drafts, q, {.temperature = 1.0}, rng, verifier).next_token, 11);
  EXPECT_EQ(seen_vocab, kVocab);
}

// c*_k = sum_x min(p_k(x), q_k(x)) by hand on 3-token distributions, under the transform (T = 1 here,
// so p is the softmax); q = p gives 1; at T = 0 it is whether the draft is the target's argmax.
TEST(AcceptanceProbabilities, AreTheOverlapOfTargetAndDraftDistributions) {
  const torch::Tensor p = torch::tensor({0.5f, 0.3f, 0.2f, 0.1f, 0.1f, 0.8f}).view({2, 3});
  const torch::Tensor logits = torch::cat({p.log(), torch::zeros({1, 3})});  // [3, 3]: 2 slots + bonus row
  const torch::Tensor q = torch::tensor({0.2f, 0.2f, 0.6f, 0.1f, 0.1f, 0.8f}).view({2, 3});
  const std::vector<int64_t> drafts = {2, 2};
  const std::vector<float> c = acceptance_probabilities(logits, drafts, q, {.temperature = 1.0});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NEAR(c[0], 0.2f + 0.2f + 0.2f, 1e-6);  // min(.5,.2) + min(.3,.2) + min(.2,.6)
  EXPECT_NEAR(c[1], 1.0f, 1e-6);                // q_1 = p_1
  const std::vector<float> greedy = acceptance_probabilities(logits, std::vector<int64_t>{0, 1}, torch::Tensor(),
                                                             {.temperature = 0});
  EXPECT_EQ(greedy, (std::vector<float>{1.0f, 0.0f}));  // argmax p_0 = 0, argmax p_1 = 2
  EXPECT_TRUE(acceptance_probabilities(logits.narrow(0, 0, 1), {}, q, {.temperature = 1.0}).empty());
}

TEST(DrawToken, GreedyIsTheArgmaxAndSamplingFollowsTheTransform) {
  const torch::Tensor row = peaked_logits({6})[0];
  Rng rng(9);
  EXPECT_EQ(draw_token(row, {.temperature = 0}, rng), 6);
  EXPECT_EQ(rng.counter(), 0u);
  // Sampled: the same uniform through sampling_probs + sample_from_probs gives the same token.
  torch::manual_seed(5);
  const torch::Tensor logits = torch::randn({kVocab});
  const SamplingParams params{.temperature = 0.7, .top_p = 0.9};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Rng a(seed), b(seed);
    const torch::Tensor probs = sampling_probs(logits.unsqueeze(0), params).contiguous();
    EXPECT_EQ(draw_token(logits, params, a), sample_from_probs(probs.data_ptr<float>(), kVocab, b));
    EXPECT_EQ(a.counter(), 1u);
  }
}

}  // namespace
}  // namespace dspark::sampling
