// Budget behaviour (DSpark paper section 8): on a realistic SPS curve the hardware-aware schedulers
// widen the verification budget when the system is idle and tighten it as concurrency grows.
//
// Curve: step time t(B) = 20 + 0.02 B + 0.0004 B^2 ms (a fixed weight-streaming cost, then a per-token
// cost that grows with B), SPS(B) = 1000 / t(B), B = 1..512; also a jagged variant that adds 3 ms per
// started tile of 64 tokens. Confidences: gamma = 6 per request, c_k uniform in [0.3, 1), seeded Rng.
// Statistic: mean l_r over 200 batches x R requests, for R = 1, 8, 64 (seed 11; dspark-async takes the
// previous batch of the same stream as its two-steps-back input). Assertion: the mean is
// non-increasing in R, strictly lower at R = 64 than at R = 1, and at R = 1 at least 4 (wider than
// MTP-1's single draft).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "sampling/rng.h"
#include "schedule/async_scheduler.h"
#include "schedule/sync_scheduler.h"

namespace dspark::schedule {
namespace {

constexpr int64_t kGamma = 6;
constexpr int kBatches = 200;

SpsTable realistic_table(double tile_ms) {
  std::vector<double> sps;
  for (int64_t b = 1; b <= 512; ++b) {
    const double t = 20.0 + 0.02 * b + 0.0004 * b * b + tile_ms * std::ceil(b / 64.0);
    sps.push_back(1000.0 / t);
  }
  return SpsTable(sps);
}

std::vector<RequestDraft> random_batch(int64_t n_requests, sampling::Rng& rng) {
  std::vector<RequestDraft> batch(static_cast<size_t>(n_requests));
  for (RequestDraft& r : batch)
    for (int64_t k = 0; k < kGamma; ++k) r.confidences.push_back(0.3 + 0.7 * rng.uniform());
  return batch;
}

using Scheduler = std::function<std::vector<int64_t>(std::span<const RequestDraft> now,
                                                     std::span<const RequestDraft> two_steps_back)>;

double mean_length(const Scheduler& scheduler, int64_t n_requests) {
  sampling::Rng rng(11);
  std::vector<RequestDraft> older = random_batch(n_requests, rng);
  double sum = 0.0;
  for (int i = 0; i < kBatches; ++i) {
    std::vector<RequestDraft> now = random_batch(n_requests, rng);
    for (int64_t l : scheduler(now, older)) sum += static_cast<double>(l);
    older = std::move(now);
  }
  return sum / (static_cast<double>(kBatches) * static_cast<double>(n_requests));
}

void expect_budget_shrinks_with_load(const char* label, const Scheduler& scheduler) {
  const double m1 = mean_length(scheduler, 1), m8 = mean_length(scheduler, 8), m64 = mean_length(scheduler, 64);
  std::printf("[ BUDGET   ] %s: mean l_r = %.3f (R = 1), %.3f (R = 8), %.3f (R = 64)\n", label, m1, m8, m64);
  EXPECT_GE(m1, m8) << label;
  EXPECT_GE(m8, m64) << label;
  EXPECT_GT(m1, m64) << label;
  EXPECT_GE(m1, 4.0) << label;
}

TEST(Budget, SyncWidensAtLowLoadAndShrinksAtHighLoad) {
  const SpsTable table = realistic_table(0.0);
  expect_budget_shrinks_with_load("dspark-sync, smooth", [&](auto now, auto) { return schedule_sync(now, table); });
}

TEST(Budget, AsyncWidensAtLowLoadAndShrinksAtHighLoad) {
  for (double tile_ms : {0.0, 3.0}) {
    const SpsTable table = realistic_table(tile_ms);
    expect_budget_shrinks_with_load(tile_ms == 0.0 ? "dspark-async, smooth" : "dspark-async, jagged",
                                    [&](auto now, auto old) { return schedule_async(now, old, table); });
  }
}

}  // namespace
}  // namespace dspark::schedule
