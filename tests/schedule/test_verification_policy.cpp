// The verification policy object (schedule/verification_policy.h): what it tells the engine each
// step, from the past only. dspark-async's gate (probes while it has no history, off with periodic
// probes whose interval doubles when drafting costs more than it saves, on when it pays; a probe
// drafts a rotating sample of the batch that stands for all of it), and the measured per-position
// acceptance that stands in for confidences.
#include <gtest/gtest.h>

#include "common/error.h"
#include "schedule/verification_policy.h"

namespace dspark::schedule {
namespace {

// verify(B) = 1 + 0.01 B seconds; drafting costs draft_cost per step when any request drafts.
SpsSource linear_cost(double draft_cost) {
  return [draft_cost](int64_t n_requests) {
    std::vector<double> sps;
    for (int64_t b = 1; b <= 128; ++b) sps.push_back(1.0 / (1.0 + 0.01 * b + (n_requests > 0 ? draft_cost : 0.0)));
    return SpsTable(sps);
  };
}

constexpr float kConfident[] = {0.9f, 0.9f, 0.9f, 0.9f};

std::vector<ProposedBlock> confident_blocks(int n) { return std::vector<ProposedBlock>(n, ProposedBlock{4, kConfident}); }

// The blocks the engine hands over for a plan: confident ones where the plan drafts, none elsewhere.
std::vector<ProposedBlock> drafted_blocks(const StepPlan& plan) {
  std::vector<ProposedBlock> blocks(plan.drafts.size());
  for (size_t i = 0; i < blocks.size(); ++i)
    if (plan.drafts[i]) blocks[i] = ProposedBlock{4, kConfident};
  return blocks;
}

StepPlan plan_of(Drafting drafting, int n) { return {drafting, std::vector<bool>(n, drafting == Drafting::kVerify)}; }

TEST(VerificationPolicy, StaticKindsAlwaysDraftAndVerify) {
  VerificationPolicy fixed(ScheduleKind::kFixed, 0.5, {});
  const StepPlan plan = fixed.plan_step(2);
  EXPECT_EQ(plan.drafting, Drafting::kVerify);
  EXPECT_EQ(plan.drafts, (std::vector<bool>{true, true}));
  EXPECT_EQ(fixed.plan_step(0).drafting, Drafting::kOff);
  EXPECT_EQ(fixed.choose_lengths(confident_blocks(2), plan), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(fixed.choose_lengths(confident_blocks(2), plan_of(Drafting::kProbe, 2)), (std::vector<int64_t>{0, 0}));
  EXPECT_THROW(VerificationPolicy(ScheduleKind::kDsparkAsync, 0.5, {}), Error);  // needs a profile
}

TEST(VerificationPolicy, AsyncProbesUntilItHasHistoryThenDraftsWhenItPays) {
  VerificationPolicy policy(ScheduleKind::kDsparkAsync, 0.5, linear_cost(0.05));
  for (int step = 0; step < 2; ++step) {  // no batch two steps back yet
    const StepPlan plan = policy.plan_step(2);
    ASSERT_EQ(plan.drafting, Drafting::kProbe);
    EXPECT_EQ(policy.choose_lengths(drafted_blocks(plan), plan), (std::vector<int64_t>{0, 0}));
  }
  for (int step = 0; step < 5; ++step) {
    const StepPlan plan = policy.plan_step(2);
    ASSERT_EQ(plan.drafting, Drafting::kVerify);
    const std::vector<int64_t> lengths = policy.choose_lengths(confident_blocks(2), plan);
    EXPECT_GT(lengths[0] + lengths[1], 0);
  }
}

// Drafting costs 50 verify steps: after the two history probes the gate stays off and probes
// after 8 steps, then 16, then 32 (the interval doubles after each probe that does not pay).
TEST(VerificationPolicy, AsyncGateProbesAtDoublingIntervalsWhenDraftingDoesNotPay) {
  VerificationPolicy policy(ScheduleKind::kDsparkAsync, 0.5, linear_cost(50.0));
  std::vector<int> probe_steps;
  for (int step = 0; step < 70; ++step) {
    const StepPlan plan = policy.plan_step(2);
    ASSERT_NE(plan.drafting, Drafting::kVerify) << "step " << step;
    if (plan.drafting == Drafting::kProbe) {
      probe_steps.push_back(step);
      policy.choose_lengths(drafted_blocks(plan), plan);
    }
  }
  EXPECT_EQ(probe_steps, (std::vector<int>{0, 1, 9, 25, 57}));
}

// The gate judges by the tables it is given: drafting that does not pay at 50 verify steps pays
// once the source says it costs 0.05 and the tables are rebuilt (the engine's rescaled profile,
// engine/step_cost_drift.h), and not before.
TEST(VerificationPolicy, RebuiltTablesComeFromTheSourceAsItIsNow) {
  double draft_cost = 50.0;
  VerificationPolicy policy(ScheduleKind::kDsparkAsync, 0.5,
                            [&draft_cost](int64_t n) { return linear_cost(draft_cost)(n); });
  for (int step = 0; step < 2; ++step) {  // the history probes
    const StepPlan plan = policy.plan_step(2);
    policy.choose_lengths(drafted_blocks(plan), plan);
  }
  EXPECT_EQ(policy.plan_step(2).drafting, Drafting::kOff);
  const double old_sps = policy.sps_table(2).sps(4);
  draft_cost = 0.05;
  EXPECT_EQ(policy.sps_table(2).sps(4), old_sps);  // built once per n, until rebuilt
  EXPECT_EQ(policy.plan_step(2).drafting, Drafting::kOff);
  policy.rebuild_sps_tables();
  EXPECT_NEAR(policy.sps_table(2).sps(4), 1.0 / (1.0 + 0.04 + 0.05), 1e-12);
  EXPECT_EQ(policy.plan_step(2).drafting, Drafting::kVerify);
}

// A probe of a 10-request batch drafts 4 requests, the next 4 after them, wrapping around; the
// requests left out draft nothing. A batch of 3 is probed whole.
TEST(VerificationPolicy, ProbesDraftARotatingSampleOfFour) {
  VerificationPolicy policy(ScheduleKind::kDsparkAsync, 0.5, linear_cost(50.0));
  std::vector<std::vector<bool>> samples;  // probes at steps 0 and 1 (history), then 9
  for (int step = 0; step < 10; ++step) {
    const StepPlan plan = policy.plan_step(10);
    ASSERT_NE(plan.drafting, Drafting::kVerify);
    if (plan.drafting == Drafting::kOff) {
      EXPECT_EQ(plan.n_drafting(), 0);
      continue;
    }
    EXPECT_EQ(plan.n_drafting(), 4);
    samples.push_back(plan.drafts);
    policy.choose_lengths(drafted_blocks(plan), plan);
  }
  ASSERT_EQ(samples.size(), 3u);
  const bool o = true, _ = false;
  EXPECT_EQ(samples[0], (std::vector<bool>{o, o, o, o, _, _, _, _, _, _}));
  EXPECT_EQ(samples[1], (std::vector<bool>{_, _, _, _, o, o, o, o, _, _}));
  EXPECT_EQ(samples[2], (std::vector<bool>{o, o, _, _, _, _, _, _, o, o}));
  VerificationPolicy small(ScheduleKind::kDsparkAsync, 0.5, linear_cost(50.0));
  EXPECT_EQ(small.plan_step(3).drafts, (std::vector<bool>{true, true, true}));
}

// The sample stands for the whole batch: where drafting pays for 16 confident requests, two
// probes of 4 of them turn the gate on for all 16, and the first verify step's capacity (taken
// from the probe two steps back) is sized for 16 requests, not 4: with verify(B) = 1 + 0.01 B and
// a small drafting cost, every confident draft of every request is worth verifying.
TEST(VerificationPolicy, AProbeSampleStandsForTheWholeBatch) {
  VerificationPolicy policy(ScheduleKind::kDsparkAsync, 0.5, linear_cost(0.05));
  for (int step = 0; step < 2; ++step) {
    const StepPlan plan = policy.plan_step(16);
    ASSERT_EQ(plan.drafting, Drafting::kProbe);
    ASSERT_EQ(plan.n_drafting(), 4);
    policy.choose_lengths(drafted_blocks(plan), plan);
  }
  const StepPlan plan = policy.plan_step(16);
  ASSERT_EQ(plan.drafting, Drafting::kVerify);
  EXPECT_EQ(plan.n_drafting(), 16);
  const std::vector<int64_t> lengths = policy.choose_lengths(confident_blocks(16), plan);
  EXPECT_EQ(policy.last_estimate().capacity, 64);
  EXPECT_EQ(lengths, std::vector<int64_t>(16, 4));
}

// Without confidences the policy ranks by the measured acceptance per position, Laplace
// smoothed: (accepted + 1) / (verified + 2). Position 1 starts at 0.5, under the threshold 0.6;
// after 10 steps that accepted it, 11/12 clears it; position 2 was never reached (0.5).
TEST(VerificationPolicy, MeasuredAcceptanceStandsInForMissingConfidences) {
  VerificationPolicy policy(ScheduleKind::kThreshold, 0.6, {});
  const std::vector<ProposedBlock> blind = {ProposedBlock{3, {}}};
  EXPECT_EQ(policy.choose_lengths(blind, plan_of(Drafting::kVerify, 1)), (std::vector<int64_t>{0}));
  for (int i = 0; i < 10; ++i) policy.observe(1, 1, /*has_confidence=*/false);
  policy.observe(2, 2, /*has_confidence=*/true);  // blocks with confidences teach nothing here
  EXPECT_EQ(policy.choose_lengths(blind, plan_of(Drafting::kVerify, 1)), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace dspark::schedule
