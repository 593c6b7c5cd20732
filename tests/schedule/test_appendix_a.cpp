// Appendix A of the DSpark paper as a fixture: one request, gamma = 2, SPS {1: 1.0, 2: 0.5, 3: 0.45},
// vocabulary {A, B}, target p_t = (0.7, 0.3) and drafter p_d = (0.5, 0.5) at every position, so
// a_1 = c_1 = sum_x min(p_t, p_d) = 0.8. The confidence head reads the previous token: c_2 = 0.9
// after x_1 = A and 0 after x_1 = B.
//
// One step: draft x_1, x_2 ~ p_d; the policy picks l from the confidences; l = 0 means the target
// samples afresh from p_t, otherwise sampling::verify_sampled checks x_1..x_l. Y is the first token
// the step outputs. Lossless means P(Y = A) = 0.7.
//
// Exact: enumerate x_1 and the accept / reject branch. Monte Carlo: 200,000 steps per case with the
// real verifier and a seeded sampling::Rng; statistic z = (n_A - n p) / sqrt(n p (1 - p)) against
// the exact value p; pass if |z| < 4 (two-sided false-alarm 6e-5 per case). The retrospective
// policy must also fail the same z-test against the target's 0.7 (|z| > 20).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "sampling/rejection.h"
#include "sampling/rng.h"
#include "schedule/async_scheduler.h"
#include "schedule/objective.h"
#include "schedule/policy.h"
#include "schedule/sps_table.h"

namespace dspark::schedule {
namespace {

constexpr int64_t kA = 0, kB = 1, kVocab = 2;
constexpr double kTarget[kVocab] = {0.7, 0.3};  // p_t
constexpr double kDraft[kVocab] = {0.5, 0.5};   // p_d
constexpr int64_t kSamples = 200000;
constexpr double kMaxAbsZ = 4.0;

using Policy = std::function<std::vector<int64_t>(std::span<const RequestDraft>)>;

SpsTable appendix_table() { return SpsTable({1.0, 0.5, 0.45}); }

// The confidences the drafter reports after drafting x_1 (c_2 reads x_1).
std::vector<RequestDraft> drafted(int64_t x1) { return {RequestDraft{{0.8, x1 == kA ? 0.9 : 0.0}}}; }

int64_t length_after(const Policy& policy, int64_t x1) { return policy(drafted(x1))[0]; }

Policy by_kind(ScheduleKind kind, std::optional<std::vector<RequestDraft>> two_steps_back = std::nullopt) {
  return [kind, old = std::move(two_steps_back), table = appendix_table()](std::span<const RequestDraft> batch) {
    ScheduleContext context;
    context.sps = &table;
    if (old) context.two_steps_back = std::span<const RequestDraft>(*old);
    return schedule_lengths(kind, batch, context);
  };
}

// P(Y = A) of one step, exactly.
double exact_p_a(const Policy& policy) {
  double residual_total = 0.0;
  for (int64_t x = 0; x < kVocab; ++x) residual_total += std::max(0.0, kTarget[x] - kDraft[x]);
  const double residual_a = std::max(0.0, kTarget[kA] - kDraft[kA]) / residual_total;
  double p = 0.0;
  for (int64_t x1 : {kA, kB}) {
    if (length_after(policy, x1) == 0) {
      p += kDraft[x1] * kTarget[kA];  // the target samples afresh
      continue;
    }
    const double accept = std::min(1.0, kTarget[x1] / kDraft[x1]);
    p += kDraft[x1] * (accept * (x1 == kA ? 1.0 : 0.0) + (1.0 - accept) * residual_a);
  }
  return p;
}

std::vector<float> rows(const double* dist, int64_t n_rows) {  // [n_rows * vocab]
  std::vector<float> out;
  for (int64_t i = 0; i < n_rows; ++i) out.insert(out.end(), dist, dist + kVocab);
  return out;
}

int64_t draw_draft(sampling::Rng& rng) { return rng.uniform() < kDraft[kA] ? kA : kB; }

// The first output token of one simulated step.
int64_t one_step(const Policy& policy, sampling::Rng& rng) {
  const std::vector<int64_t> drafts{draw_draft(rng), draw_draft(rng)};
  const int64_t l = length_after(policy, drafts[0]);
  const std::span<const int64_t> verified(drafts.data(), static_cast<size_t>(l));
  const sampling::VerifyOutcome out =
      sampling::verify_sampled(rows(kTarget, l + 1), rows(kDraft, l), verified, kVocab, rng);
  return out.n_accepted >= 1 ? drafts[0] : out.next_token;
}

double mc_p_a(const Policy& policy, uint64_t seed) {
  sampling::Rng rng(seed);
  int64_t n_a = 0;
  for (int64_t i = 0; i < kSamples; ++i) n_a += one_step(policy, rng) == kA;
  return static_cast<double>(n_a) / kSamples;
}

double z_score(double observed, double p) { return (observed - p) * kSamples / std::sqrt(kSamples * p * (1 - p)); }

TEST(AppendixA, ThroughputsMatchThePaper) {
  const SpsTable table = appendix_table();
  const auto high = drafted(kA), low = drafted(kB);
  EXPECT_DOUBLE_EQ(expected_throughput(high, std::vector<int64_t>{0}, table), 1.0);
  EXPECT_DOUBLE_EQ(expected_throughput(high, std::vector<int64_t>{1}, table), 0.9);
  EXPECT_NEAR(expected_throughput(high, std::vector<int64_t>{2}, table), 1.134, 1e-12);
  EXPECT_NEAR(expected_throughput(low, std::vector<int64_t>{2}, table), 0.81, 1e-12);
}

TEST(AppendixA, RetrospectiveDecidesOnX1FromX1Itself) {
  const Policy retro = by_kind(ScheduleKind::kRetrospective);
  EXPECT_EQ(length_after(retro, kA), 2);
  EXPECT_EQ(length_after(retro, kB), 0);
}

TEST(AppendixA, RetrospectiveIsBiasedExactly) { EXPECT_NEAR(exact_p_a(by_kind(ScheduleKind::kRetrospective)), 0.85, 1e-12); }

TEST(AppendixA, RetrospectiveIsBiasedMonteCarlo) {
  const double p = mc_p_a(by_kind(ScheduleKind::kRetrospective), 101);
  std::printf("[ MC       ] retrospective P(A) = %.4f over %lld steps (exact 0.85, z = %.2f; z vs 0.7 = %.1f)\n", p,
              static_cast<long long>(kSamples), z_score(p, 0.85), z_score(p, 0.7));
  EXPECT_LT(std::fabs(z_score(p, 0.85)), kMaxAbsZ) << p;
  EXPECT_GT(std::fabs(z_score(p, 0.7)), 20.0) << "the z-test against the target must catch the bias";
}

TEST(AppendixA, SyncEarlyStopVerifiesNothingAndIsLossless) {
  const Policy sync = by_kind(ScheduleKind::kDsparkSync);
  EXPECT_EQ(length_after(sync, kA), 0);  // Theta_1 = 0.9 <= Theta_0 = 1.0: stop before reading c_2
  EXPECT_EQ(length_after(sync, kB), 0);
  EXPECT_NEAR(exact_p_a(sync), 0.7, 1e-12);
  const double p = mc_p_a(sync, 202);
  std::printf("[ MC       ] dspark-sync P(A) = %.4f over %lld steps (exact 0.7, z = %.2f)\n", p,
              static_cast<long long>(kSamples), z_score(p, 0.7));
  EXPECT_LT(std::fabs(z_score(p, 0.7)), kMaxAbsZ) << p;
}

// The old batches (two steps back) used for dspark-async, with the capacity each gives.
struct History {
  std::vector<RequestDraft> old_batch;
  int64_t capacity;
};
std::vector<History> histories() {
  return {
      {{RequestDraft{{0.8, 0.9}}}, 2},                    // the high-confidence path seen before: Theta 1.134 at K = 2
      {{RequestDraft{{0.8, 0.0}}}, 0},                    // the low one: Theta_0 = 1.0 is the maximum
      {{RequestDraft{{0.8, 0.9}}, RequestDraft{{0.8}}}, 1},  // two requests: 2.8 * 0.45 = 1.26 > 2 * 0.5
  };
}

TEST(AppendixA, AsyncCapacityComesFromTheOldBatchOnly) {
  const SpsTable table = appendix_table();
  for (const History& h : histories()) EXPECT_EQ(capacity_global_search(h.old_batch, table), h.capacity);
  // The same search on the current confidences would read x_1 through c_2:
  EXPECT_EQ(capacity_global_search(drafted(kA), table), 2);
  EXPECT_EQ(capacity_global_search(drafted(kB), table), 0);
}

TEST(AppendixA, AsyncIsLosslessForEveryCapacity) {
  uint64_t seed = 303;
  for (const History& h : histories()) {
    const Policy async = by_kind(ScheduleKind::kDsparkAsync, h.old_batch);
    // K is fixed before x_1 is drawn, and slot 1 ranks first whatever c_2 is: x_1 is verified
    // either for both values of x_1 or for neither.
    EXPECT_EQ(length_after(async, kA) >= 1, length_after(async, kB) >= 1) << "K = " << h.capacity;
    EXPECT_EQ(length_after(async, kA), h.capacity);
    EXPECT_EQ(length_after(async, kB), std::min<int64_t>(h.capacity, 1));  // a_2 = 0 is no candidate
    EXPECT_NEAR(exact_p_a(async), 0.7, 1e-12) << "K = " << h.capacity;
    const double p = mc_p_a(async, seed++);
    std::printf("[ MC       ] dspark-async (K = %lld) P(A) = %.4f over %lld steps (exact 0.7, z = %.2f)\n",
                static_cast<long long>(h.capacity), p, static_cast<long long>(kSamples), z_score(p, 0.7));
    EXPECT_LT(std::fabs(z_score(p, 0.7)), kMaxAbsZ) << "K = " << h.capacity << ", P(A) = " << p;
  }
}

TEST(AppendixA, LoadBlindPoliciesAreLosslessExactly) {
  for (ScheduleKind kind : {ScheduleKind::kNone, ScheduleKind::kMtp1, ScheduleKind::kFixed, ScheduleKind::kThreshold})
    EXPECT_NEAR(exact_p_a(by_kind(kind)), 0.7, 1e-12) << schedule_kind_name(kind);
}

}  // namespace
}  // namespace dspark::schedule
