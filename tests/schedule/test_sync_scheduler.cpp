// Algorithm 1 (dspark-sync) on hand-worked batches. With the smooth table SPS(B) = 4 / (3 + B),
// admitting an extension of survival a at B tokens raises Theta iff a * (3 + B) > tau, which is how
// the expected lengths below were worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "expect_error.h"
#include "schedule/async_scheduler.h"
#include "schedule/objective.h"
#include "schedule/sync_scheduler.h"

namespace dspark::schedule {
namespace {

using Lengths = std::vector<int64_t>;

SpsTable smooth_table(int64_t max_tokens = 512) {
  std::vector<double> sps;
  for (int64_t b = 1; b <= max_tokens; ++b) sps.push_back(4.0 / (3.0 + static_cast<double>(b)));
  return SpsTable(sps);
}

// A cliff after B = 2: Theta peaks at l = 1, dips, then climbs past it from l = 3 on.
SpsTable cliff_table() { return SpsTable({1.0, 0.95, 0.6, 0.59, 0.58, 0.57}); }

std::vector<RequestDraft> identical(int64_t n_requests, std::vector<double> confidences) {
  return std::vector<RequestDraft>(static_cast<size_t>(n_requests), RequestDraft{confidences});
}

TEST(SyncScheduler, AdmitsMoreAtLowLoadAndFewerAtHighLoad) {
  const SpsTable table = smooth_table();
  const std::vector<double> c{0.9, 0.9, 0.9, 0.9};  // a = .9, .81, .729, .6561
  EXPECT_EQ(schedule_sync(identical(1, c), table), Lengths({4}));
  // R = 8: all first slots (.9 * (11 + m) > 8 + .9 m), all second slots (.81 * (19 + m) > 15.2 + .81 m),
  // then .729 * 27 = 19.7 < 21.68: stop.
  EXPECT_EQ(schedule_sync(identical(8, c), table), Lengths(8, 2));
  // R = 64: .9 * 67 = 60.3 < 64 already.
  EXPECT_EQ(schedule_sync(identical(64, c), table), Lengths(64, 0));
}

TEST(SyncScheduler, RanksExtensionsGloballyAcrossRequests) {
  // a: r0 = .95, .855, .7695; r1 = .6, .3. Path .95, .855, .7695, .6 admitted (Theta keeps rising),
  // then .3 * 9 = 2.7 < tau = 5.1745: stop. r0's third slot goes before r1's first.
  const std::vector<RequestDraft> batch{{{0.95, 0.9, 0.9}}, {{0.6, 0.5}}};
  EXPECT_EQ(schedule_sync(batch, smooth_table()), Lengths({3, 1}));
}

TEST(SyncScheduler, EveryAdmissionRaisesThroughputAndTheNextWouldNot) {
  const SpsTable table = smooth_table();
  const std::vector<RequestDraft> batch{{{0.95, 0.9, 0.9}}, {{0.6, 0.5}}};
  const Lengths chosen = schedule_sync(batch, table);
  const double theta = expected_throughput(batch, chosen, table);
  EXPECT_GT(theta, expected_throughput(batch, Lengths({2, 1}), table));  // one fewer
  EXPECT_GT(theta, expected_throughput(batch, Lengths({3, 2}), table));  // the next on the path
}

TEST(SyncScheduler, EarlyStopHaltsAtTheFirstLocalMaximumOfAJaggedTable) {
  const SpsTable table = cliff_table();
  const std::vector<RequestDraft> batch = identical(1, {0.9, 0.9, 0.9, 0.9, 0.9});
  const Lengths sync = schedule_sync(batch, table);
  EXPECT_EQ(sync, Lengths({1}));  // Theta: 1.0, 1.805, then 2.71 * 0.6 = 1.626: stop
  const Lengths global = schedule_retrospective(batch, table);
  EXPECT_EQ(global, Lengths({5}));  // 4.68559 * 0.57 = 2.671 beyond the cliff
  EXPECT_LT(expected_throughput(batch, sync, table), expected_throughput(batch, global, table));
}

TEST(SyncScheduler, StopsOnEqualThroughput) {
  // Theta_1 = 1.5 * 1.0 equals Theta_0 = 1 * 1.5 exactly: not an increase.
  EXPECT_EQ(schedule_sync(identical(1, {0.5}), SpsTable({1.5, 1.0})), Lengths({0}));
}

TEST(SyncScheduler, RespectsCaps) {
  std::vector<RequestDraft> batch = identical(3, {0.99, 0.99, 0.99, 0.99});
  batch[0].cap = 0;  // speculation off
  batch[1].cap = 1;
  EXPECT_EQ(schedule_sync(batch, smooth_table()), Lengths({0, 1, 4}));
}

TEST(SyncScheduler, RequestsWithFewerDraftsThanGamma) {
  const std::vector<RequestDraft> batch{{{0.9}}, {{0.9, 0.9, 0.9, 0.9}}, {{}}};
  EXPECT_EQ(schedule_sync(batch, smooth_table()), Lengths({1, 4, 0}));
}

TEST(SyncScheduler, NeverAdmitsASlotOfZeroSurvival) {
  // The table would reward more tokens, but a_2 = 0 cannot be accepted.
  EXPECT_EQ(schedule_sync(identical(1, {0.9, 0.0, 0.9}), smooth_table()), Lengths({1}));
}

TEST(SyncScheduler, EqualSurvivalsKeepPrefixOrder) {
  // All a = 1: ties everywhere; every prefix of the path is per-request prefixes, and at low load
  // everything is admitted.
  EXPECT_EQ(schedule_sync(identical(2, {1.0, 1.0, 1.0}), smooth_table()), Lengths({3, 3}));
}

TEST(SyncScheduler, StopsAtTheEdgeOfTheTable) {
  // Theta would keep rising, but B = 3 is the largest measured step.
  EXPECT_EQ(schedule_sync(identical(1, {0.9, 0.9, 0.9, 0.9}), SpsTable({1.0, 0.99, 0.98})), Lengths({2}));
  // R alone beyond the table: nothing to compare, no speculation.
  EXPECT_EQ(schedule_sync(identical(4, {0.9}), SpsTable({1.0, 0.99, 0.98})), Lengths(4, 0));
}

TEST(SyncScheduler, EmptyBatch) { EXPECT_TRUE(schedule_sync({}, smooth_table()).empty()); }

TEST(SyncScheduler, RejectsBadConfidencesAndCaps) {
  const SpsTable table = smooth_table();
  test::expect_error([&] { schedule_sync(identical(2, {0.9, 1.5}), table); }, {"request 0", "slot 2", "1.5"});
  test::expect_error([&] { schedule_sync(identical(1, {-0.1}), table); }, {"slot 1", "[0, 1]"});
  test::expect_error([&] { schedule_sync(identical(1, {std::nan("")}), table); }, {"confidence"});
  std::vector<RequestDraft> batch = identical(2, {0.5});
  batch[1].cap = -1;
  test::expect_error([&] { schedule_sync(batch, table); }, {"request 1", "cap -1"});
}

}  // namespace
}  // namespace dspark::schedule
