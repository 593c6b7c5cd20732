// dspark-async: the capacity K from an unconstrained global search over older confidences, and
// top-K admission of the current ones; the retrospective (test-only) policy; the history holder.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "schedule/async_scheduler.h"
#include "schedule/confidence_history.h"
#include "schedule/objective.h"
#include "schedule/sync_scheduler.h"

namespace dspark::schedule {
namespace {

using Lengths = std::vector<int64_t>;

std::vector<RequestDraft> identical(int64_t n_requests, std::vector<double> confidences) {
  return std::vector<RequestDraft>(static_cast<size_t>(n_requests), RequestDraft{confidences});
}

int64_t total(const Lengths& l) { return std::accumulate(l.begin(), l.end(), int64_t{0}); }

// A cliff after B = 2: Theta along c = 0.9 x 5 is 1.0, 1.805, 1.626, 2.029, 2.375, 2.671.
SpsTable cliff_table() { return SpsTable({1.0, 0.95, 0.6, 0.59, 0.58, 0.57}); }
// Flat up to B = 5, then half speed.
SpsTable step_table() { return SpsTable({1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5}); }

TEST(AsyncCapacity, GlobalSearchCrossesACliffThatEarlyStopCannot) {
  const SpsTable table = cliff_table();
  const std::vector<RequestDraft> batch = identical(1, {0.9, 0.9, 0.9, 0.9, 0.9});
  EXPECT_EQ(capacity_global_search(batch, table), 5);
  EXPECT_EQ(schedule_sync(batch, table), Lengths({1}));
}

TEST(AsyncCapacity, HandWorkedOnAStepTable) {
  // R = 2, path .9 .9 .81 .81: Theta 2, 2.9, 3.8, 4.61 (B = 5), then 5.42 * 0.5: K = 3.
  EXPECT_EQ(capacity_global_search(identical(2, {0.9, 0.9}), step_table()), 3);
}

TEST(AsyncCapacity, SmallestCapacityOnTies) {
  // Theta_1 = 1.5 * 1.0 equals Theta_0 = 1 * 1.5 exactly.
  EXPECT_EQ(capacity_global_search(identical(1, {0.5}), SpsTable({1.5, 1.0})), 0);
}

TEST(AsyncCapacity, BoundedByCandidatesAndTable) {
  EXPECT_EQ(capacity_global_search({}, step_table()), 0);
  EXPECT_EQ(capacity_global_search(identical(1, {0.9, 0.0, 0.9}), step_table()), 1);  // one candidate
  EXPECT_EQ(capacity_global_search(identical(1, {1.0, 1.0, 1.0, 1.0}), SpsTable({1.0, 1.0, 1.0})), 2);
  EXPECT_EQ(capacity_global_search(identical(4, {1.0}), SpsTable({1.0, 1.0, 1.0})), 0);  // R > table
}

TEST(AsyncAdmission, TopKPicksTheHighestCurrentSurvival) {
  // a: r0 = .5, .2; r1 = .9, .72, .072. Path: (1,1) (1,2) (0,1) (0,2) (1,3).
  const std::vector<RequestDraft> batch{{{0.5, 0.4}}, {{0.9, 0.8, 0.1}}};
  const std::vector<Lengths> expected{{0, 0}, {0, 1}, {0, 2}, {1, 2}, {2, 2}, {2, 3}};
  for (int64_t k = 0; k < static_cast<int64_t>(expected.size()); ++k)
    EXPECT_EQ(admit_top_k(batch, k), expected[static_cast<size_t>(k)]) << "K = " << k;
  EXPECT_EQ(admit_top_k(batch, 100), Lengths({2, 3}));
}

TEST(AsyncAdmission, RespectsCapsAndPrefixOrderOnTies) {
  std::vector<RequestDraft> batch = identical(3, {1.0, 1.0, 1.0});
  batch[0].cap = 0;
  batch[2].cap = 1;
  // All a = 1: slot 1 of every allowed request before any slot 2.
  EXPECT_EQ(admit_top_k(batch, 1), Lengths({0, 1, 0}));
  EXPECT_EQ(admit_top_k(batch, 2), Lengths({0, 1, 1}));
  EXPECT_EQ(admit_top_k(batch, 3), Lengths({0, 2, 1}));
  EXPECT_EQ(admit_top_k(batch, 9), Lengths({0, 3, 1}));
}

TEST(AsyncScheduler, CapacityFromTwoStepsBackAdmissionFromNow) {
  const SpsTable table = step_table();
  const std::vector<RequestDraft> now{{{0.5, 0.4}}, {{0.9, 0.8, 0.1}}};
  const std::vector<RequestDraft> old_high = identical(2, {0.9, 0.9});  // K = 3
  const std::vector<RequestDraft> old_low = identical(2, {0.1});        // K = 2, see below
  EXPECT_EQ(schedule_async(now, old_high, table), Lengths({1, 2}));
  // Flat table up to B = 5: any positive a raises Theta, so old_low's one candidate gives K = 2.
  EXPECT_EQ(capacity_global_search(old_low, table), 2);
  EXPECT_EQ(schedule_async(now, old_low, table), Lengths({0, 2}));
  // The current confidences never move K: a weaker current batch gets the same count.
  const std::vector<RequestDraft> weak_now{{{0.2, 0.2}}, {{0.3, 0.1}}};
  EXPECT_EQ(total(schedule_async(weak_now, old_high, table)), 3);
}

TEST(AsyncScheduler, CapacityClampedToTheTableForThisBatch) {
  const SpsTable table = cliff_table();                                  // max 6 tokens
  const std::vector<RequestDraft> old = identical(1, {0.9, 0.9, 0.9, 0.9, 0.9});  // K = 5
  EXPECT_EQ(total(schedule_async(identical(3, {0.9, 0.9}), old, table)), 3);      // 6 - 3 anchors
  EXPECT_EQ(schedule_async(identical(7, {0.9}), old, table), Lengths(7, 0));      // R > table
}

TEST(AsyncScheduler, FallsBackToAlgorithm1WithoutHistory) {
  const SpsTable table = cliff_table();
  const std::vector<RequestDraft> batch = identical(1, {0.9, 0.9, 0.9, 0.9, 0.9});
  EXPECT_EQ(schedule_async(batch, std::nullopt, table), schedule_sync(batch, table));
  EXPECT_EQ(schedule_async(batch, std::nullopt, table), Lengths({1}));
}

TEST(AsyncScheduler, EmptyBatches) {
  EXPECT_TRUE(schedule_async({}, identical(2, {0.9}), step_table()).empty());
  EXPECT_EQ(schedule_async(identical(2, {0.9}), std::vector<RequestDraft>{}, step_table()), Lengths(2, 0));
}

TEST(Retrospective, IsGlobalSearchOnTheCurrentConfidences) {
  const SpsTable table = cliff_table();
  const std::vector<RequestDraft> batch = identical(1, {0.9, 0.9, 0.9, 0.9, 0.9});
  EXPECT_EQ(schedule_retrospective(batch, table), Lengths({5}));
  EXPECT_EQ(schedule_retrospective(batch, table), schedule_async(batch, batch, table));
}

TEST(ConfidenceHistory, HandsBackTheBatchPushedTwoStepsEarlier) {
  ConfidenceHistory history;
  EXPECT_FALSE(history.two_steps_back());
  history.push(identical(1, {0.1}));
  EXPECT_FALSE(history.two_steps_back());
  history.push(identical(2, {0.2}));
  ASSERT_TRUE(history.two_steps_back());
  EXPECT_EQ(history.two_steps_back()->size(), 1u);
  EXPECT_DOUBLE_EQ((*history.two_steps_back())[0].confidences[0], 0.1);
  history.push(identical(3, {0.3}));
  EXPECT_EQ(history.two_steps_back()->size(), 2u);
  EXPECT_DOUBLE_EQ((*history.two_steps_back())[0].confidences[0], 0.2);
  history.clear();
  EXPECT_FALSE(history.two_steps_back());
}

// One request with c = 0.9, 0.9: plain decoding runs at SPS 1.0 (1 token per step). With a cheap
// drafter (steps at 0.9 of the speed) verifying both drafts gives (1 + 0.9 + 0.81) x 0.9 = 2.44
// tokens per unit time: drafting pays. With a drafter that takes 4x a verify step (SPS 0.2 at
// every B) the best is 2.71 x 0.2 = 0.54 < 1: it does not.
TEST(AsyncDraftingGate, DraftsOnlyWhenTheOldBatchSaysItPays) {
  const std::vector<RequestDraft> old = identical(1, {0.9, 0.9});
  const SpsTable plain({1.0, 1.0, 1.0});
  EXPECT_TRUE(drafting_pays(old, SpsTable({0.9, 0.9, 0.9}), plain));
  EXPECT_FALSE(drafting_pays(old, SpsTable({0.2, 0.2, 0.2}), plain));
  // Confidences near zero: nothing to gain even with free drafting beyond the anchor's token.
  EXPECT_FALSE(drafting_pays(identical(1, {0.0, 0.0}), SpsTable({1.0, 1.0, 1.0}), plain));
  // A request that could verify nothing says nothing: no information, so draft.
  const std::vector<RequestDraft> capped = {RequestDraft{{0.9}, 0}};
  EXPECT_TRUE(drafting_pays(capped, SpsTable({0.2, 0.2, 0.2}), plain));
}

}  // namespace
}  // namespace dspark::schedule
