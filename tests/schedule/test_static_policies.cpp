// The load-blind policies: none, mtp1, fixed, threshold (on the cumulative survival a_j).
#include <gtest/gtest.h>

#include <vector>

#include "expect_error.h"
#include "schedule/static_policies.h"

namespace dspark::schedule {
namespace {

using Lengths = std::vector<int64_t>;

// r0: 4 drafts; r1: speculation off; r2: 1 draft; r3: nothing drafted; r4: cap 2 of 3.
std::vector<RequestDraft> mixed_batch() {
  return {{{0.9, 0.8, 0.5, 0.9}}, {{0.9, 0.9}, 0}, {{0.4}}, {{}}, {{1.0, 1.0, 1.0}, 2}};
}

TEST(StaticPolicies, None) { EXPECT_EQ(schedule_none(mixed_batch()), Lengths(5, 0)); }

TEST(StaticPolicies, Mtp1VerifiesOneDraftWhereThereIsOne) {
  EXPECT_EQ(schedule_mtp1(mixed_batch()), Lengths({1, 0, 1, 0, 1}));
}

TEST(StaticPolicies, FixedVerifiesEveryDraftUpToTheCap) {
  EXPECT_EQ(schedule_fixed(mixed_batch()), Lengths({4, 0, 1, 0, 2}));
}

TEST(StaticPolicies, ThresholdCutsOnTheCumulativeSurvival) {
  // r0: a = .9, .72, .36, .324; r2: a = .4; r4: a = 1, 1 (cap 2).
  EXPECT_EQ(schedule_threshold(mixed_batch(), 0.5), Lengths({2, 0, 0, 0, 2}));
  EXPECT_EQ(schedule_threshold(mixed_batch(), 0.3), Lengths({4, 0, 1, 0, 2}));
  // A cut on the per-slot c (.9 .8 .5 .9) would verify all four of r0 at 0.35; on a, .324 is out.
  EXPECT_EQ(schedule_threshold(mixed_batch(), 0.35), Lengths({3, 0, 1, 0, 2}));
  EXPECT_EQ(schedule_threshold(mixed_batch(), 0.0), schedule_fixed(mixed_batch()));
  EXPECT_EQ(schedule_threshold(mixed_batch(), 1.0), Lengths({0, 0, 0, 0, 2}));  // a = 1 passes a >= 1
}

TEST(StaticPolicies, ThresholdStopsAtTheFirstSlotBelow) {
  // a = .9, 0, 0: c_3 = 1 cannot bring slot 3 back.
  EXPECT_EQ(schedule_threshold(std::vector<RequestDraft>{{{0.9, 0.0, 1.0}}}, 0.1), Lengths({1}));
}

TEST(StaticPolicies, EmptyBatch) {
  EXPECT_TRUE(schedule_none({}).empty());
  EXPECT_TRUE(schedule_mtp1({}).empty());
  EXPECT_TRUE(schedule_fixed({}).empty());
  EXPECT_TRUE(schedule_threshold({}, 0.5).empty());
}

TEST(StaticPolicies, RejectBadInput) {
  test::expect_error([] { schedule_threshold(mixed_batch(), 1.5); }, {"threshold", "1.5", "[0, 1]"});
  test::expect_error([] { schedule_threshold(mixed_batch(), -0.1); }, {"threshold"});
  test::expect_error([] { schedule_fixed(std::vector<RequestDraft>{{{0.5, 2.0}}}); }, {"request 0", "slot 2"});
  test::expect_error([] { schedule_mtp1(std::vector<RequestDraft>{{{0.5}, -3}}); }, {"cap -3"});
}

}  // namespace
}  // namespace dspark::schedule
