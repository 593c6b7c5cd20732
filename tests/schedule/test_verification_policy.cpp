// The verification policy object (schedule/verification_policy.h): what it tells the engine each
// step, from the past only. dspark-async's gate (probes while it has no history, off with periodic
// probes whose interval doubles when drafting costs more than it saves, on when it pays), and the
// measured per-position acceptance that stands in for confidences.
#include <gtest/gtest.h>

#include "common/error.h"
#include "schedule/verification_policy.h"

namespace dspark::schedule {
namespace {

// verify(B) = 1 + 0.01 B seconds; drafting costs draft_cost per step when any request drafts.
SpsSource linear_cost(double draft_cost) {
  return [draft_cost](int64_t n_requests) {
    std::vector<double> sps;
    for (int64_t b = 1; b <= 64; ++b) sps.push_back(1.0 / (1.0 + 0.01 * b + (n_requests > 0 ? draft_cost : 0.0)));
    return SpsTable(sps);
  };
}

constexpr float kConfident[] = {0.9f, 0.9f, 0.9f, 0.9f};

std::vector<ProposedBlock> confident_blocks(int n) { return std::vector<ProposedBlock>(n, ProposedBlock{4, kConfident}); }

TEST(VerificationPolicy, StaticKindsAlwaysDraftAndVerify) {
  VerificationPolicy fixed(ScheduleKind::kFixed, 0.5, {});
  EXPECT_EQ(fixed.plan_step(true), Drafting::kVerify);
  EXPECT_EQ(fixed.plan_step(false), Drafting::kOff);
  EXPECT_EQ(fixed.choose_lengths(confident_blocks(2), Drafting::kVerify), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(fixed.choose_lengths(confident_blocks(2), Drafting::kProbe), (std::vector<int64_t>{0, 0}));
  EXPECT_THROW(VerificationPolicy(ScheduleKind::kDsparkAsync, 0.5, {}), Error);  // needs a profile
}

TEST(VerificationPolicy, AsyncProbesUntilItHasHistoryThenDraftsWhenItPays) {
  VerificationPolicy policy(ScheduleKind::kDsparkAsync, 0.5, linear_cost(0.05));
  for (int step = 0; step < 2; ++step) {  // no batch two steps back yet
    ASSERT_EQ(policy.plan_step(true), Drafting::kProbe);
    EXPECT_EQ(policy.choose_lengths(confident_blocks(2), Drafting::kProbe), (std::vector<int64_t>{0, 0}));
  }
  for (int step = 0; step < 5; ++step) {
    ASSERT_EQ(policy.plan_step(true), Drafting::kVerify);
    const std::vector<int64_t> lengths = policy.choose_lengths(confident_blocks(2), Drafting::kVerify);
    EXPECT_GT(lengths[0] + lengths[1], 0);
  }
}

// Drafting costs 50 verify steps: after the two history probes the gate stays off and probes
// after 8 steps, then 16, then 32 (the interval doubles after each probe that does not pay).
TEST(VerificationPolicy, AsyncGateProbesAtDoublingIntervalsWhenDraftingDoesNotPay) {
  VerificationPolicy policy(ScheduleKind::kDsparkAsync, 0.5, linear_cost(50.0));
  std::vector<int> probe_steps;
  for (int step = 0; step < 70; ++step) {
    const Drafting d = policy.plan_step(true);
    ASSERT_NE(d, Drafting::kVerify) << "step " << step;
    if (d == Drafting::kProbe) {
      probe_steps.push_back(step);
      policy.choose_lengths(confident_blocks(2), d);
    }
  }
  EXPECT_EQ(probe_steps, (std::vector<int>{0, 1, 9, 25, 57}));
}

// Without confidences the policy ranks by the measured acceptance per position, Laplace
// smoothed: (accepted + 1) / (verified + 2). Position 1 starts at 0.5, under the threshold 0.6;
// after 10 steps that accepted it, 11/12 clears it; position 2 was never reached (0.5).
TEST(VerificationPolicy, MeasuredAcceptanceStandsInForMissingConfidences) {
  VerificationPolicy policy(ScheduleKind::kThreshold, 0.6, {});
  const std::vector<ProposedBlock> blind = {ProposedBlock{3, {}}};
  EXPECT_EQ(policy.choose_lengths(blind, Drafting::kVerify), (std::vector<int64_t>{0}));
  for (int i = 0; i < 10; ++i) policy.observe(1, 1, /*has_confidence=*/false);
  policy.observe(2, 2, /*has_confidence=*/true);  // blocks with confidences teach nothing here
  EXPECT_EQ(policy.choose_lengths(blind, Drafting::kVerify), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace dspark::schedule
