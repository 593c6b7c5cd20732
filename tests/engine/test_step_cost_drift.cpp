// The step-cost profile rescaled by the engine's own steps (engine/step_cost_drift.h): a fresh
// drift predicts the profile; the drafting call and the rest of the step each take the median of
// their recent measured / profiled ratios, so a stall moves neither; steps the profile did not
// measure (a prefill chunk, a B past its range) leave them alone; and the engine plans with it.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/step_cost_drift.h"
#include "test_util.h"

namespace dspark::engine {
namespace {

namespace fs = std::filesystem;

StepCost profile() {
  StepCost cost;
  cost.gamma = 3;
  cost.verify_seconds = {0.010, 0.011, 0.012, 0.013, 0.014, 0.015, 0.016, 0.017};
  cost.plain_verify_seconds = {0.010, 0.014};
  cost.draft_seconds = {0.004, 0.006};
  return cost;
}

// A step of R drafting requests and B tokens over n requests whose parts take draft_scale and
// rest_scale times what the profile says.
StepTiming step_at(const StepCost& cost, int64_t R, int64_t B, int64_t n, double draft_scale, double rest_scale) {
  StepTiming t;
  t.drafting_requests = R;
  t.verify_tokens = B;
  t.requests = n;
  t.draft_seconds = draft_scale * cost.draft_cost(R);
  t.seconds = t.draft_seconds + rest_scale * cost.rest_seconds(R, B, n);
  return t;
}

TEST(StepCostDrift, AFreshDriftPredictsTheProfile) {
  const StepCost cost = profile();
  const StepCostDrift drift(cost);
  EXPECT_DOUBLE_EQ(drift.predict(2, 8, 2), cost.step_seconds(2, 8, 2));
  EXPECT_DOUBLE_EQ(drift.predict(0, 2, 2), 0.014);  // plain: as measured
  EXPECT_EQ(drift.predict(2, 9, 2), 0.0);           // past the profile
  EXPECT_DOUBLE_EQ(drift.sps_for(1).sps(5), cost.sps_for(1).sps(5));
}

// Drafting ran 1.5x its profile and the rest 0.8x: both factors follow, each from its own part,
// and the tables are reported stale once, when the factors move (not again while they hold).
TEST(StepCostDrift, EachPartTakesItsOwnMeasuredOverProfiledRatio) {
  const StepCost cost = profile();
  StepCostDrift drift(cost);
  EXPECT_TRUE(drift.observe(step_at(cost, 1, 4, 1, 1.5, 0.8)));
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(drift.observe(step_at(cost, 2, 8, 2, 1.5, 0.8)));
  EXPECT_NEAR(drift.draft_scale(), 1.5, 1e-12);
  EXPECT_NEAR(drift.verify_scale(), 0.8, 1e-12);
  EXPECT_NEAR(drift.predict(2, 8, 2), 1.5 * 0.006 + 0.8 * 0.017, 1e-12);
  EXPECT_NEAR(drift.sps_for(1).sps(4), 1.0 / (1.5 * 0.004 + 0.8 * 0.013), 1e-12);
  EXPECT_NEAR(drift.sps_for(0).sps(2), 1.0 / (0.8 * 0.014), 1e-12);
  // Plain steps (no drafting call) inform the rest's factor only.
  for (int i = 0; i < StepCostDrift::kWindow; ++i) drift.observe(step_at(cost, 0, 2, 2, 1.0, 1.2));
  EXPECT_NEAR(drift.draft_scale(), 1.5, 1e-12);
  EXPECT_NEAR(drift.verify_scale(), 1.2, 1e-12);
}

// A window of 31 steps at the profile's speed, then 15 stalls at 5x: the median holds at 1.
// Once stalls outnumber the rest of the window the factor follows them (the machine did slow).
TEST(StepCostDrift, AMinorityOfStallsMovesNothing) {
  const StepCost cost = profile();
  StepCostDrift drift(cost);
  for (int i = 0; i < StepCostDrift::kWindow; ++i) drift.observe(step_at(cost, 1, 4, 1, 1.0, 1.0));
  for (int i = 0; i < 15; ++i) EXPECT_FALSE(drift.observe(step_at(cost, 1, 4, 1, 5.0, 5.0)));
  EXPECT_DOUBLE_EQ(drift.draft_scale(), 1.0);
  EXPECT_DOUBLE_EQ(drift.verify_scale(), 1.0);
  EXPECT_TRUE(drift.observe(step_at(cost, 1, 4, 1, 5.0, 5.0)));
  EXPECT_DOUBLE_EQ(drift.verify_scale(), 5.0);
}

TEST(StepCostDrift, StepsTheProfileDidNotMeasureAreSkipped) {
  const StepCost cost = profile();
  StepCostDrift drift(cost);
  StepTiming prefill = step_at(cost, 1, 4, 1, 3.0, 3.0);
  prefill.prefill_tokens = 100;
  EXPECT_FALSE(drift.observe(prefill));
  EXPECT_FALSE(drift.observe(step_at(cost, 2, 9, 2, 3.0, 3.0)));  // B past the profile
  EXPECT_DOUBLE_EQ(drift.draft_scale(), 1.0);
  EXPECT_DOUBLE_EQ(drift.verify_scale(), 1.0);
}

// The engine predicts each step from the rescaled profile: with a profile that says every step
// takes a second, the tiny model's real steps (milliseconds) bring the prediction within a few
// steps to the clock, while profile_seconds keeps the profile's figure.
TEST(StepCostDrift, TheEnginePredictsFromTheRescaledProfile) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load((fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string());
  StepCost cost;
  cost.verify_seconds.assign(16, 1.0);
  Engine engine(target, nullptr, {.max_concurrency = 2, .schedule = schedule::ScheduleKind::kNone, .step_cost = &cost,
                                  .rescale_step_cost = true});
  engine.submit({{1, 2, 3}, {}, 24, {}});
  std::vector<StepTiming> steps;
  while (!engine.idle()) {
    engine.step();
    steps.push_back(engine.last_step());
  }
  ASSERT_GE(steps.size(), 20u);
  EXPECT_DOUBLE_EQ(steps[1].predicted_seconds, 1.0);  // the first decode step: nothing timed yet
  EXPECT_DOUBLE_EQ(steps.back().profile_seconds, 1.0);
  EXPECT_GT(steps.back().predicted_seconds, 0.0);
  EXPECT_LT(steps.back().predicted_seconds, 0.1);  // the real steps take milliseconds
  // Without rescaling the engine plans with the profile as given, every step.
  Engine fixed(target, nullptr, {.max_concurrency = 2, .schedule = schedule::ScheduleKind::kNone, .step_cost = &cost});
  fixed.submit({{1, 2, 3}, {}, 24, {}});
  while (!fixed.idle()) {
    fixed.step();
    EXPECT_DOUBLE_EQ(fixed.last_step().predicted_seconds, 1.0);
  }
}

}  // namespace
}  // namespace dspark::engine
