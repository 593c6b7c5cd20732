// bench accept's confidence-head evaluation (DeepSpec 5.5) and its place in the report: the rounds
// STS and the metrics read are the drafting steps' confidences as logits, and the per-file ECE and
// ROC-AUC come out as hand-computed on small constructed sets.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/accept_bench.h"
#include "bench/accept_report.h"

namespace dspark::bench {
namespace {

engine::DraftRound step(std::vector<float> confidence, int64_t accepted, std::vector<float> exact) {
  engine::DraftRound r;
  r.verified = static_cast<int64_t>(exact.size());
  r.confidence = std::move(confidence);
  r.accepted = accepted;
  r.exact_acceptance = std::move(exact);
  return r;
}

// One-slot rounds: n_high at confidence `high` of which `high_accepted` accepted, and n_high at
// 1 - high of which n_high - high_accepted accepted; exact probability 1 on accepted rounds, 0 else.
std::vector<engine::DraftRound> two_groups(float high, int n_high, int high_accepted) {
  std::vector<engine::DraftRound> steps;
  for (int i = 0; i < n_high; ++i) {
    const bool accepted = i < high_accepted;
    steps.push_back(step({high}, accepted, {accepted ? 1.0f : 0.0f}));
  }
  for (int i = 0; i < n_high; ++i) {
    const bool accepted = i < n_high - high_accepted;
    steps.push_back(step({1.0f - high}, accepted, {accepted ? 1.0f : 0.0f}));
  }
  return steps;
}

TEST(CalibrationRounds, ConfidencesBecomeLogitsAndStepsWithoutThemAreLeftOut) {
  const std::vector<engine::DraftRound> steps = {step({0.8f, 0.5f}, 1, {0.9f, 0.4f}), step({}, 0, {})};
  const std::vector<calibrate::Round> rounds = calibration_rounds(steps);
  ASSERT_EQ(rounds.size(), 1u);
  ASSERT_EQ(rounds[0].logits.size(), 2u);
  EXPECT_NEAR(rounds[0].logits[0], std::log(4.0), 1e-6);
  EXPECT_NEAR(rounds[0].logits[1], 0.0, 1e-6);
  EXPECT_EQ(rounds[0].accepted, 1);
  ASSERT_EQ(rounds[0].exact.size(), 2u);
  EXPECT_NEAR(rounds[0].exact[0], 0.9, 1e-6);
  // A confidence of exactly 0 or 1 stays a finite logit.
  EXPECT_TRUE(std::isfinite(calibration_rounds(std::vector{step({1.0f, 0.0f}, 1, {1.0f, 0.0f})})[0].logits[0]));
}

// 10 rounds at 0.8 (8 accepted) and 10 at 0.2 (2 accepted): calibrated, so ECE 0; AUC =
// (8 positives above 8 negatives + half of the 8 x 2 + 2 x 8 ties) / 100 = 0.8; the exact
// probabilities separate the labels perfectly: 1.
TEST(ConfidenceMetrics, CalibratedGroupsGiveZeroEceAndTheHandComputedAuc) {
  const std::optional<ConfidenceMetrics> m = confidence_metrics(two_groups(0.8f, 10, 8), 1);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->rounds, 20);
  EXPECT_NEAR(m->ece, 0.0, 1e-6);
  EXPECT_NEAR(m->auc, 0.8, 1e-9);
  EXPECT_NEAR(m->auc_exact, 1.0, 1e-9);
  // Yet a calibrated head does not read 0 when its labels are drawn: on 10 rounds per group the
  // floor is E|Bin(10, 0.8) / 10 - 0.8| = 0.0966 (the 0.2 group mirrors it), estimated from 200
  // redraws with a standard error of 0.004; within 0.015.
  EXPECT_NEAR(m->ece_floor, 0.0966, 0.015);
}

// The same labels at 0.9 / 0.1: each bin is off by 0.1, so ECE 0.1; the ranking, so the AUC, is unchanged.
TEST(ConfidenceMetrics, OverconfidenceShowsInEceNotInAuc) {
  const std::optional<ConfidenceMetrics> m = confidence_metrics(two_groups(0.9f, 10, 8), 1);
  ASSERT_TRUE(m.has_value());
  EXPECT_NEAR(m->ece, 0.1, 1e-6);
  EXPECT_NEAR(m->auc, 0.8, 1e-9);
}

TEST(ConfidenceMetrics, NoneWithoutAConfidenceHead) {
  EXPECT_FALSE(confidence_metrics(std::vector{step({}, 2, {1.0f, 1.0f})}, 7).has_value());
}

AcceptReport report_with(std::optional<ConfidenceMetrics> a1, std::optional<ConfidenceMetrics> a2) {
  AcceptReport r{.drafters = {"dspark", "eagle3"}, .files = {"eval/gsm8k.jsonl", "eval/mbpp.jsonl"}, .thresholds = {0.0}};
  r.options.gamma = 1;
  r.cells = {{"dspark", "eval/gsm8k.jsonl", 0.0, {}, a1},
             {"dspark", "eval/mbpp.jsonl", 0.0, {}, a2},
             {"eagle3", "eval/gsm8k.jsonl", 0.0, {}, std::nullopt},
             {"eagle3", "eval/mbpp.jsonl", 0.0, {}, std::nullopt}};
  return r;
}

TEST(AcceptReport, ListsTheConfidenceMetricsPerFileWithAMacroRow) {
  const AcceptReport r =
      report_with(ConfidenceMetrics{20, 0.01, 0.02, 0.8, 0.9}, ConfidenceMetrics{30, 0.03, 0.04, 0.7, 0.8});
  const std::string md = r.markdown();
  EXPECT_NE(md.find("| dspark | gsm8k | 20 | 0.0100 | 0.0200 | 0.800 | 0.900 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dspark | mbpp | 30 | 0.0300 | 0.0400 | 0.700 | 0.800 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dspark | **macro** | 50 | 0.0200 | 0.0300 | 0.750 | 0.850 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("| eagle3 | gsm8k |"), std::string::npos) << md;
  const nlohmann::json j = r.to_json("target");
  EXPECT_DOUBLE_EQ(j["results"][1]["confidence"]["auc_mean"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(j["results"][1]["confidence"]["ece_floor_mean"].get<double>(), 0.04);
  EXPECT_EQ(j["results"][1]["confidence"]["rounds"].get<int64_t>(), 30);
  EXPECT_FALSE(j["results"][2].contains("confidence"));
}

// A threshold sweep gets its own table (it was computed and left out of the Markdown), and the
// per-position rates of a cell whose blocks were cut short are gamma long, null where no block
// reached (they were as long as the furthest position drafted).
TEST(AcceptReport, ShowsTheSweepAndPadsPerPositionRatesToGamma) {
  AcceptReport r = report_with(std::nullopt, std::nullopt);
  r.options.gamma = 3;
  r.thresholds = {0.0, 0.5};
  engine::RequestStats cut;  // every block cut to one slot: 5 tokens in 4 steps, 2 drafts, 1 accepted
  cut.record_step(1, 1, 2);
  cut.record_step(1, 0, 1);
  cut.record_step(0, 0, 1);
  cut.record_step(0, 0, 1);
  r.cells.push_back({"dspark", "eval/gsm8k.jsonl", 0.5, cut, std::nullopt});
  r.cells.push_back({"dspark", "eval/mbpp.jsonl", 0.5, cut, std::nullopt});
  const std::string md = r.markdown();
  EXPECT_NE(md.find("| drafter | threshold | macro tau | drafts/proposal |"), std::string::npos) << md;
  EXPECT_NE(md.find("| dspark | 0.50 | 1.250 | 0.50 |"), std::string::npos) << md;  // 5 tokens in 4 steps
  EXPECT_EQ(md.find("| eagle3 | 0.50 |"), std::string::npos) << md;  // no sweep without confidences
  const nlohmann::json j = r.to_json("target");
  const nlohmann::json& rates = j["results"][4]["accept_rate"];
  ASSERT_EQ(rates.size(), 3u);
  EXPECT_DOUBLE_EQ(rates[0].get<double>(), 0.5);
  EXPECT_TRUE(rates[1].is_null());
  EXPECT_TRUE(rates[2].is_null());
  EXPECT_EQ(report_with(std::nullopt, std::nullopt).markdown().find("threshold sweep"), std::string::npos);
}

TEST(AcceptReport, HasNoConfidenceTableWhenNoDrafterHasAHead) {
  EXPECT_EQ(report_with(std::nullopt, std::nullopt).markdown().find("Confidence head"), std::string::npos);
}

}  // namespace
}  // namespace dspark::bench
