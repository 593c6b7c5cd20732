#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "draft/ngram_drafter.h"
#include "expect_error.h"
#include "sampling/rng.h"

namespace dspark::draft {
namespace {

using Tokens = std::vector<int64_t>;
constexpr int64_t kVocab = 16;

// begin() on slot with `prompt`, then one proposal from `anchor`.
DraftBlock propose_after(NgramDrafter& drafter, const Tokens& prompt, int64_t anchor, int64_t gamma,
                         int64_t slot = 0) {
  drafter.begin(slot, prompt, torch::Tensor());
  return drafter.propose({DraftRequest{.slot = slot, .anchor = anchor, .gamma = gamma}}).at(0);
}

TEST(NgramLookup, FollowsTheLongestRecurringSuffix) {
  // Suffix "7 8 9" recurs at 0 (followed by 5); the shorter "9" recurs more recently (followed by 1).
  EXPECT_EQ(ngram_lookup({7, 8, 9, 5, 0, 9, 1, 7, 8, 9}, 1, 3, 1), Tokens({5}));
  // With max_ngram 1 only "9" is looked up.
  EXPECT_EQ(ngram_lookup({7, 8, 9, 5, 0, 9, 1, 7, 8, 9}, 1, 1, 1), Tokens({1}));
}

TEST(NgramLookup, StopsAtTheEndOfTheContext) {
  // "a a a a": suffix "a a a" recurs one step back, so only one token is known to follow it.
  EXPECT_EQ(ngram_lookup({4, 4, 4, 4}, 5, 3, 1), Tokens({4}));
  EXPECT_EQ(ngram_lookup({1, 2, 1, 2}, 5, 3, 1), Tokens({1, 2}));
  EXPECT_TRUE(ngram_lookup({}, 5, 3, 1).empty());
  EXPECT_TRUE(ngram_lookup({3}, 5, 3, 1).empty());
}

TEST(NgramDrafter, ProposesARepeatedPattern) {
  NgramDrafter drafter(1, kVocab);
  // History 1 2 3 4 1 2 + anchor 3: "1 2 3" recurs at 0, followed by 4 1 2 3.
  const DraftBlock block = propose_after(drafter, {1, 2, 3, 4, 1, 2}, 3, 3);
  EXPECT_EQ(block.tokens, Tokens({4, 1, 2}));
  ASSERT_TRUE(block.probs.defined());
  EXPECT_EQ(block.probs.sizes(), torch::IntArrayRef({3, kVocab}));
  EXPECT_EQ(block.probs.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(block.probs.device().is_cpu());
  for (int64_t k = 0; k < 3; ++k) {  // one-hot: the drafter is deterministic
    EXPECT_EQ(block.probs[k][block.tokens[k]].item<float>(), 1.0f);
    EXPECT_EQ(block.probs[k].sum().item<float>(), 1.0f);
  }
  EXPECT_TRUE(block.confidence.empty());
}

TEST(NgramDrafter, LongestMatchWins) {
  NgramDrafter drafter(1, kVocab);
  // "7 8 9" recurs at 0 (then 5); "9" alone recurs later (then 1): the 3-gram wins.
  EXPECT_EQ(propose_after(drafter, {7, 8, 9, 5, 0, 9, 1, 7, 8}, 9, 1).tokens, Tokens({5}));
}

TEST(NgramDrafter, MostRecentOccurrenceWins) {
  NgramDrafter drafter(1, kVocab);
  // "1 2" occurs at 0 (then 5) and at 3 (then 6); no longer suffix recurs.
  EXPECT_EQ(propose_after(drafter, {1, 2, 5, 1, 2, 6, 1}, 2, 1).tokens, Tokens({6}));
}

TEST(NgramDrafter, GammaCapsTheLength) {
  // History 1..8 1 2 + anchor 3: "1 2 3" recurs at 0, followed by 4 5 6 7 8 1 2 3.
  const Tokens prompt = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2}, follow = {4, 5, 6, 7, 8};
  for (int64_t gamma : {0, 1, 2, 5}) {
    NgramDrafter drafter(1, kVocab);
    const DraftBlock block = propose_after(drafter, prompt, 3, gamma);
    EXPECT_EQ(block.tokens, Tokens(follow.begin(), follow.begin() + gamma)) << "gamma " << gamma;
    EXPECT_EQ(block.probs.defined(), gamma > 0);
  }
}

TEST(NgramDrafter, NoMatchProposesNothing) {
  NgramDrafter drafter(1, kVocab);
  const DraftBlock block = propose_after(drafter, {1, 2, 3, 4}, 5, 4);
  EXPECT_TRUE(block.tokens.empty());
  EXPECT_FALSE(block.probs.defined());
}

TEST(NgramDrafter, MinNgramRejectsShortMatches) {
  NgramDrafter drafter(1, kVocab, /*max_ngram=*/3, /*min_ngram=*/2);
  // Only the 1-gram "3" recurs.
  EXPECT_TRUE(propose_after(drafter, {3, 9, 4, 5}, 3, 4).tokens.empty());
}

TEST(NgramDrafter, CommitExtendsTheHistory) {
  NgramDrafter drafter(1, kVocab);
  EXPECT_TRUE(propose_after(drafter, {1, 2, 3}, 4, 3).tokens.empty());
  drafter.commit(0, {4}, torch::Tensor());  // the anchor, nothing accepted
  // 4 is known only through the commit: history 1 2 3 4 + anchor 1 -> 2 3 4.
  EXPECT_EQ(drafter.propose({DraftRequest{.slot = 0, .anchor = 1, .gamma = 3}}).at(0).tokens, Tokens({2, 3, 4}));
  drafter.commit(0, {1, 2, 3}, torch::Tensor());  // anchor plus two accepted drafts
  // History 1 2 3 4 1 2 3 + anchor 4: "2 3 4" recurs at 1, followed by 1 2 3 4.
  EXPECT_EQ(drafter.propose({DraftRequest{.slot = 0, .anchor = 4, .gamma = 7}}).at(0).tokens,
            Tokens({1, 2, 3, 4}));
}

TEST(NgramDrafter, SlotsAreIndependent) {
  NgramDrafter drafter(3, kVocab);
  drafter.begin(0, {1, 2, 3, 1}, torch::Tensor());
  drafter.begin(2, {1, 5, 6, 1}, torch::Tensor());
  const auto blocks = drafter.propose({DraftRequest{.slot = 2, .anchor = 5, .gamma = 2},
                                       DraftRequest{.slot = 0, .anchor = 2, .gamma = 2}});
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].tokens, Tokens({6, 1}));  // in request order
  EXPECT_EQ(blocks[1].tokens, Tokens({3, 1}));
  drafter.end(2);
  drafter.commit(0, {2}, torch::Tensor());
  EXPECT_EQ(drafter.propose({DraftRequest{.slot = 0, .anchor = 3, .gamma = 2}}).at(0).tokens, Tokens({1, 2}));
  drafter.begin(2, {9}, torch::Tensor());  // a freed slot starts from its new prompt only
  EXPECT_TRUE(drafter.propose({DraftRequest{.slot = 2, .anchor = 5, .gamma = 2}}).at(0).tokens.empty());
}

TEST(NgramDrafter, UsesNoRandomness) {
  NgramDrafter drafter(1, kVocab);
  drafter.begin(0, {1, 2, 1}, torch::Tensor());
  sampling::Rng rng(7);
  sampling::SamplingParams params;
  const auto blocks =
      drafter.propose({DraftRequest{.slot = 0, .anchor = 2, .gamma = 2, .sampling = &params, .rng = &rng}});
  EXPECT_EQ(blocks.at(0).tokens, Tokens({1, 2}));
  EXPECT_EQ(rng.counter(), 0u);
}

TEST(NgramDrafter, Describes) {
  NgramDrafter drafter(4, kVocab);
  EXPECT_EQ(drafter.method(), "ngram");
  EXPECT_TRUE(drafter.target_layer_ids().empty());
  EXPECT_EQ(drafter.max_slots(), 4);
}

TEST(NgramDrafter, ErrorsOnBadSlot) {
  NgramDrafter drafter(2, kVocab);
  const torch::Tensor none;
  test::expect_error([&] { drafter.begin(2, {1}, none); }, {"slot 2", "[0, 2)"});
  test::expect_error([&] { drafter.begin(-1, {1}, none); }, {"slot -1"});
  test::expect_error([&] { drafter.propose({DraftRequest{.slot = 0, .anchor = 1}}); }, {"propose", "slot 0", "not begun"});
  test::expect_error([&] { drafter.propose({DraftRequest{.slot = 5, .anchor = 1}}); }, {"propose", "slot 5"});
  test::expect_error([&] { drafter.commit(1, {1}, none); }, {"commit", "slot 1", "not begun"});
  test::expect_error([&] { drafter.end(1); }, {"end", "slot 1"});
  drafter.begin(0, {1, 2}, none);
  test::expect_error([&] { drafter.begin(0, {1}, none); }, {"slot 0", "already in use"});
  drafter.end(0);
  test::expect_error([&] { drafter.propose({DraftRequest{.slot = 0, .anchor = 1}}); }, {"not begun"});
}

TEST(NgramDrafter, ErrorsOnBadArguments) {
  test::expect_error([] { NgramDrafter(0, kVocab); }, {"max_slots", "0"});
  test::expect_error([] { NgramDrafter(1, 0); }, {"vocab_size"});
  test::expect_error([] { NgramDrafter(1, kVocab, 2, 3); }, {"min_ngram 3", "max_ngram 2"});
  test::expect_error([] { NgramDrafter(1, kVocab, 3, 0); }, {"min_ngram 0"});
  NgramDrafter drafter(1, kVocab);
  test::expect_error([&] { drafter.begin(0, {1, kVocab}, torch::Tensor()); }, {"prompt token 16"});
  drafter.begin(0, {1, 2}, torch::Tensor());
  test::expect_error([&] { drafter.propose({DraftRequest{.slot = 0, .anchor = -1}}); }, {"anchor token -1"});
  test::expect_error([&] { drafter.propose({DraftRequest{.slot = 0, .anchor = 1, .gamma = -1}}); }, {"gamma", "-1"});
  test::expect_error([&] { drafter.commit(0, {}, torch::Tensor()); }, {"without the anchor"});
}

}  // namespace
}  // namespace dspark::draft
