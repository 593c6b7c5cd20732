// RequestStats: the vLLM-named counters of a few hand-made steps, their ratios, and pooling.
#include <gtest/gtest.h>

#include "engine/request_stats.h"

namespace dspark::engine {
namespace {

TEST(RequestStats, CountsStepsDraftsAndAcceptancePerPosition) {
  RequestStats s;
  s.record_step(3, 3, 4);  // all 3 accepted + bonus
  s.record_step(3, 1, 2);  // 1 accepted + residual
  s.record_step(0, 0, 1);  // nothing verified: one token
  s.record_step(2, 0, 1);  // rejected at once
  EXPECT_EQ(s.num_steps, 4);
  EXPECT_EQ(s.num_drafts, 3);
  EXPECT_EQ(s.num_draft_tokens, 8);
  EXPECT_EQ(s.num_accepted_tokens, 4);
  EXPECT_EQ(s.num_committed_tokens, 8);
  EXPECT_EQ(s.num_draft_tokens_per_pos, (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(s.num_accepted_tokens_per_pos, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_DOUBLE_EQ(s.acceptance_length(), 8.0 / 4);
  EXPECT_DOUBLE_EQ(s.mean_acceptance_length(), 1.0 + 4.0 / 3);
  EXPECT_DOUBLE_EQ(s.acceptance_rate(), 4.0 / 8);
  EXPECT_DOUBLE_EQ(s.drafts_per_step(), 8.0 / 4);
  EXPECT_EQ(s.accept_rate_per_pos(), (std::vector<double>{2.0 / 3, 1.0 / 3, 1.0 / 2}));
  // Position 1 was reached by the 2 steps that accepted position 0; position 2 by min(1, 2) = 1.
  EXPECT_EQ(s.conditional_accept_rate(), (std::vector<double>{2.0 / 3, 1.0 / 2, 1.0 / 1}));
}

TEST(RequestStats, MergeSumsEveryCounter) {
  RequestStats a, b;
  a.record_step(2, 2, 3);
  a.generated_tokens = 4;
  b.record_step(4, 1, 2);
  b.generated_tokens = 3;
  a.merge(b);
  EXPECT_EQ(a.num_steps, 2);
  EXPECT_EQ(a.generated_tokens, 7);
  EXPECT_EQ(a.num_draft_tokens, 6);
  EXPECT_EQ(a.num_draft_tokens_per_pos, (std::vector<int64_t>{2, 2, 1, 1}));
  EXPECT_EQ(a.num_accepted_tokens_per_pos, (std::vector<int64_t>{2, 1, 0, 0}));
}

TEST(RequestStats, DecodeRateCountsTokensAfterTheFirst) {
  RequestStats s;
  s.generated_tokens = 11;
  s.first_token_seconds = 0.5;
  s.seconds = 2.5;
  EXPECT_DOUBLE_EQ(s.decode_tokens_per_second(), 10 / 2.0);
  s.generated_tokens = 1;
  EXPECT_EQ(s.decode_tokens_per_second(), 0.0);
}

}  // namespace
}  // namespace dspark::engine
