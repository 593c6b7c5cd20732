// The greedy admission path: order, tie-breaking, candidate set, and the property every policy
// relies on, that each prefix of the path is the best set of per-request prefixes of its size.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sampling/rng.h"
#include "schedule/admission_path.h"

namespace dspark::schedule {
namespace {

using Lengths = std::vector<int64_t>;

TEST(AdmissionPath, SortsBySurvivalThenSlotThenRequest) {
  const std::vector<RequestDraft> batch{{{0.5, 1.0}}, {{0.9, 0.5}}, {{0.5}}};
  // a: r0 = .5, .5; r1 = .9, .45; r2 = .5
  const std::vector<Extension> path = admission_path(batch);
  const std::vector<std::pair<int64_t, int64_t>> expected{{1, 1}, {0, 1}, {2, 1}, {0, 2}, {1, 2}};
  ASSERT_EQ(path.size(), expected.size());
  for (size_t i = 0; i < path.size(); ++i) {
    EXPECT_EQ(path[i].request, expected[i].first) << i;
    EXPECT_EQ(path[i].slot, expected[i].second) << i;
  }
  EXPECT_DOUBLE_EQ(path[4].survival, 0.45);
}

TEST(AdmissionPath, LeavesOutZeroSurvivalAndSlotsBeyondTheCap) {
  std::vector<RequestDraft> batch{{{0.9, 0.0, 1.0}}, {{0.8, 0.8, 0.8}, 2}, {{0.7}, 0}};
  const std::vector<Extension> path = admission_path(batch);
  ASSERT_EQ(path.size(), 3u);  // (0, 1), (1, 1), (1, 2)
  EXPECT_EQ(lengths_after(path, 3, 3), Lengths({1, 2, 0}));
}

TEST(AdmissionPath, LengthsAfterCountsPerRequest) {
  const std::vector<RequestDraft> batch{{{0.9, 0.9}}, {{0.85}}};
  const std::vector<Extension> path = admission_path(batch);  // .9 (0,1), .85 (1,1), .81 (0,2)
  EXPECT_EQ(lengths_after(path, 0, 2), Lengths({0, 0}));
  EXPECT_EQ(lengths_after(path, 2, 2), Lengths({1, 1}));
  EXPECT_EQ(lengths_after(path, 3, 2), Lengths({2, 1}));
}

// Random batches, confidences drawn from a small set so ties (and c = 1, c = 0) are frequent.
std::vector<RequestDraft> random_batch(sampling::Rng& rng) {
  static const double kValues[] = {0.0, 0.3, 0.5, 0.5, 0.9, 1.0, 1.0};
  const auto n_requests = static_cast<int64_t>(rng.next_u64() % 6);
  std::vector<RequestDraft> batch(static_cast<size_t>(n_requests));
  for (RequestDraft& r : batch) {
    const auto n = rng.next_u64() % 6;
    for (uint64_t k = 0; k < n; ++k) r.confidences.push_back(kValues[rng.next_u64() % 7]);
    if (rng.next_u64() % 3 == 0) r.cap = static_cast<int64_t>(rng.next_u64() % 4);
  }
  return batch;
}

// 2,000 random batches (seed 7): slots of a request appear as 1, 2, 3, ... on the path, survival
// never rises along it, and every candidate of survival > 0 is on it. Together: every cut of the
// path admits per-request prefixes, and no extension left out beats one admitted.
TEST(AdmissionPath, EveryPrefixIsPrefixOrderedAndBest) {
  sampling::Rng rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::vector<RequestDraft> batch = random_batch(rng);
    const std::vector<Extension> path = admission_path(batch);
    Lengths l(batch.size(), 0);
    for (const Extension& e : path) {
      ASSERT_EQ(e.slot, l[static_cast<size_t>(e.request)] + 1) << "trial " << trial;
      ASSERT_GT(e.survival, 0.0);
      ASSERT_LE(e.slot, n_verifiable(batch[static_cast<size_t>(e.request)]));
      l[static_cast<size_t>(e.request)] = e.slot;
    }
    for (size_t i = 1; i < path.size(); ++i) ASSERT_GE(path[i - 1].survival, path[i].survival) << "trial " << trial;
    // Every candidate with a > 0 is on the path.
    for (size_t r = 0; r < batch.size(); ++r) {
      const std::vector<double> a = survival(batch[r]);
      const auto positive = std::count_if(a.begin(), a.end(), [](double x) { return x > 0.0; });
      ASSERT_EQ(l[r], positive) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace dspark::schedule
