// ScheduleKind names and parsing, and the schedule_lengths dispatcher.
#include <gtest/gtest.h>

#include <vector>

#include "expect_error.h"
#include "schedule/async_scheduler.h"
#include "schedule/policy.h"
#include "schedule/static_policies.h"
#include "schedule/sync_scheduler.h"

namespace dspark::schedule {
namespace {

using Lengths = std::vector<int64_t>;

const std::vector<ScheduleKind> kCliKinds{ScheduleKind::kNone,      ScheduleKind::kMtp1,
                                          ScheduleKind::kFixed,     ScheduleKind::kThreshold,
                                          ScheduleKind::kDsparkSync, ScheduleKind::kDsparkAsync};

TEST(ScheduleKind, NamesRoundTrip) {
  const std::vector<std::string> names{"none", "mtp1", "fixed", "threshold", "dspark-sync", "dspark-async"};
  for (size_t i = 0; i < kCliKinds.size(); ++i) {
    EXPECT_EQ(schedule_kind_name(kCliKinds[i]), names[i]);
    EXPECT_EQ(parse_schedule_kind(names[i]), kCliKinds[i]);
  }
  EXPECT_EQ(cli_schedule_names(), "none, mtp1, fixed, threshold, dspark-sync, dspark-async");
}

TEST(ScheduleKind, RetrospectiveIsNotParseable) {
  EXPECT_EQ(schedule_kind_name(ScheduleKind::kRetrospective), "retrospective");
  test::expect_error([] { parse_schedule_kind("retrospective"); }, {"test-only", "not lossless"});
  test::expect_error([] { parse_schedule_kind("dspark"); }, {"unknown schedule 'dspark'", "dspark-async"});
  test::expect_error([] { parse_schedule_kind(""); }, {"unknown schedule"});
}

TEST(ScheduleKind, WhichNeedATable) {
  EXPECT_FALSE(needs_sps_table(ScheduleKind::kNone));
  EXPECT_FALSE(needs_sps_table(ScheduleKind::kThreshold));
  EXPECT_TRUE(needs_sps_table(ScheduleKind::kDsparkSync));
  EXPECT_TRUE(needs_sps_table(ScheduleKind::kDsparkAsync));
  EXPECT_TRUE(needs_sps_table(ScheduleKind::kRetrospective));
}

// A batch where every policy gives a different answer, on a cliff table (max 8 tokens).
std::vector<RequestDraft> batch() { return {{{0.9, 0.9, 0.9, 0.9, 0.9}}, {{0.6, 0.5}, 1}}; }
SpsTable table() { return SpsTable({1.0, 0.95, 0.9, 0.55, 0.54, 0.53, 0.52, 0.51}); }

TEST(SchedulePolicy, DispatchesToEachPolicy) {
  const SpsTable sps = table();
  const std::vector<RequestDraft> old{{{0.9, 0.9}}};
  ScheduleContext context;
  context.sps = &sps;
  context.threshold = 0.7;
  const auto run = [&](ScheduleKind kind) { return schedule_lengths(kind, batch(), context); };
  EXPECT_EQ(run(ScheduleKind::kNone), schedule_none(batch()));
  EXPECT_EQ(run(ScheduleKind::kMtp1), schedule_mtp1(batch()));
  EXPECT_EQ(run(ScheduleKind::kFixed), schedule_fixed(batch()));
  EXPECT_EQ(run(ScheduleKind::kThreshold), schedule_threshold(batch(), 0.7));
  EXPECT_EQ(run(ScheduleKind::kDsparkSync), schedule_sync(batch(), sps));
  EXPECT_EQ(run(ScheduleKind::kDsparkAsync), schedule_sync(batch(), sps));  // no history yet
  EXPECT_EQ(run(ScheduleKind::kRetrospective), schedule_retrospective(batch(), sps));
  context.two_steps_back = old;
  EXPECT_EQ(run(ScheduleKind::kDsparkAsync), schedule_async(batch(), old, sps));
  // The hand-worked values, so the comparisons above are not vacuous.
  EXPECT_EQ(run(ScheduleKind::kFixed), Lengths({5, 1}));
  EXPECT_EQ(run(ScheduleKind::kThreshold), Lengths({3, 0}));          // a = .9 .81 .729 .656; .6
  EXPECT_EQ(run(ScheduleKind::kDsparkSync), Lengths({1, 0}));         // Theta 1.9, 2.61, then 3.71 * 0.55 = 2.04: stop
  EXPECT_EQ(run(ScheduleKind::kRetrospective), Lengths({5, 1}));      // K = 6: 6.28559 * 0.51 = 3.21, past the cliff
  EXPECT_EQ(run(ScheduleKind::kDsparkAsync), Lengths({2, 0}));        // K = 2 from the old batch
}

TEST(SchedulePolicy, TableDrivenKindsNeedATable) {
  const ScheduleContext no_table;
  for (ScheduleKind kind : {ScheduleKind::kDsparkSync, ScheduleKind::kDsparkAsync, ScheduleKind::kRetrospective})
    test::expect_error([&] { schedule_lengths(kind, batch(), no_table); }, {schedule_kind_name(kind), "SPS table"});
  EXPECT_EQ(schedule_lengths(ScheduleKind::kFixed, batch(), no_table), Lengths({5, 1}));
}

TEST(SchedulePolicy, EveryKindHandlesAnEmptyBatch) {
  const SpsTable sps = table();
  ScheduleContext context;
  context.sps = &sps;
  for (ScheduleKind kind : kCliKinds) EXPECT_TRUE(schedule_lengths(kind, {}, context).empty());
}

}  // namespace
}  // namespace dspark::schedule
