// The serving benchmark's bookkeeping: a point's runs reduce to their per-metric median, and one
// closed-loop point on the shipped model counts every request and token it served.
#include <gtest/gtest.h>

#include "bench/serve_bench.h"
#include "common/error.h"
#include "test_util.h"

namespace dspark::bench {
namespace {

namespace fs = std::filesystem;

ServePoint run_with(double aggregate, double user, double budget, int64_t tokens) {
  ServePoint p;
  p.schedule = "dspark-async";
  p.concurrency = 4;
  p.requests = 8;
  p.output_tokens = tokens;
  p.seconds = 1.0;
  p.aggregate_tps = aggregate;
  p.user_tps_mean = user;
  p.mean_budget = budget;
  return p;
}

// Each metric's median is taken on its own: the middle aggregate comes from one run and the
// middle per-user speed from another.
TEST(ServeBench, MedianPointTakesEachMetricsMedian) {
  const ServePoint m = median_point({run_with(100, 9, 0.5, 10), run_with(300, 7, 2.0, 20), run_with(200, 8, 1.0, 30)});
  EXPECT_EQ(m.aggregate_tps, 200);
  EXPECT_EQ(m.user_tps_mean, 8);
  EXPECT_EQ(m.mean_budget, 1.0);
  EXPECT_EQ(m.output_tokens, 60);
  EXPECT_EQ(m.requests, 24);
  EXPECT_EQ(m.runs, 3);
  EXPECT_EQ(median_point({run_with(100, 1, 0, 1), run_with(200, 3, 0, 1)}).aggregate_tps, 150);
  EXPECT_THROW(median_point({}), Error);
}

// Closed loop at concurrency 2 with 5 requests of 6 tokens each (no stop ids, so none ends
// early): every request is served once, and the aggregate rate is tokens over wall time.
TEST(ServeBench, PointServesEveryRequestOfTheClosedLoop) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load((fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string());
  engine::StepCost cost;
  cost.verify_seconds.assign(16, 1.0);
  ServeOptions o;
  o.min_requests = 5;
  o.requests_per_client = 2;  // 2 clients x 2 < 5
  o.max_tokens = 6;
  const ServePoint p =
      run_serve_point(target, nullptr, cost, schedule::ScheduleKind::kNone, 2, {{1, 2, 3}, {4, 5, 6, 7}}, o);
  EXPECT_EQ(p.requests, 5);
  EXPECT_EQ(p.output_tokens, 30);
  EXPECT_NEAR(p.aggregate_tps, 30 / p.seconds, 1e-9);
  EXPECT_GT(p.user_tps_p90, 0);
  EXPECT_EQ(p.mean_budget, 0);
  EXPECT_EQ(p.acceptance_length, 1.0);
  EXPECT_EQ(p.draft_share, 0.0);  // no drafter
  // The cost model: a profile of 1 s per step against real steps of about a millisecond, which
  // the rescaled profile follows after the first decode step (engine/step_cost_drift.h).
  EXPECT_GT(p.cost_model_steps, 0);
  EXPECT_LT(p.profile_ratio, 0.1);
  EXPECT_GT(p.cost_model_ratio, 0.3);
}

// The step log sees every step of the point, with the point's schedule and concurrency; the
// decode steps it sees are the ones the cost-model summary counts.
TEST(ServeBench, StepLogSeesEveryStep) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load((fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string());
  engine::StepCost cost;
  cost.verify_seconds.assign(16, 1e-3);
  ServeOptions o;
  o.min_requests = 3;
  o.max_tokens = 5;
  int64_t steps = 0, decode_steps = 0;
  o.on_step = [&](const std::string& schedule, int64_t concurrency, const engine::StepTiming& t) {
    EXPECT_EQ(schedule, "none");
    EXPECT_EQ(concurrency, 2);
    EXPECT_DOUBLE_EQ(t.profile_seconds, 1e-3);
    EXPECT_GT(t.predicted_seconds, 0.0);
    ++steps;
    decode_steps += t.prefill_tokens == 0;
  };
  const ServePoint p =
      run_serve_point(target, nullptr, cost, schedule::ScheduleKind::kNone, 2, {{1, 2, 3}, {4, 5, 6, 7}}, o);
  EXPECT_GE(steps, 5);  // at least the 5 tokens of the longest request
  EXPECT_EQ(p.cost_model_steps, decode_steps);
}

}  // namespace
}  // namespace dspark::bench
