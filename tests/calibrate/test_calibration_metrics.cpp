// Calibration metrics against hand-computed values, DeepSpec's binning edge cases, and (for the
// AUC) the exact pairwise definition it approximates.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "calibrate/calibration_metrics.h"
#include "expect_error.h"

namespace dspark::calibrate {
namespace {

using Labels = std::vector<uint8_t>;

TEST(CalibrationMetrics, EceHandComputed) {
  // bin 2  (p in [0.10, 0.15)): preds 0.12, 0.14, labels 0, 1 -> |0.13 - 0.5| = 0.37, weight 2/5
  // bin 12 (p in [0.60, 0.65)): preds 0.61, 0.63, labels 1, 1 -> |0.62 - 1.0| = 0.38, weight 2/5
  // bin 18 (p in [0.90, 0.95)): pred  0.92,       label  1    -> |0.92 - 1.0| = 0.08, weight 1/5
  // ECE = (2 * 0.37 + 2 * 0.38 + 0.08) / 5 = 1.58 / 5 = 0.316
  const std::vector<double> p = {0.12, 0.61, 0.14, 0.92, 0.63};
  const Labels y = {0, 1, 1, 1, 1};
  EXPECT_NEAR(expected_calibration_error(p, y), 0.316, 1e-12);

  const ReliabilityDiagram d = reliability_diagram(p, y);
  ASSERT_EQ(d.bins.size(), 20u);
  EXPECT_EQ(d.n_total, 5);
  EXPECT_EQ(d.bins[2].count, 2);
  EXPECT_NEAR(d.bins[2].mean_prediction, 0.13, 1e-12);
  EXPECT_NEAR(d.bins[2].mean_label, 0.5, 1e-12);
  EXPECT_EQ(d.bins[12].count, 2);
  EXPECT_EQ(d.bins[18].count, 1);
  EXPECT_DOUBLE_EQ(d.bins[18].lower, 0.90);
  EXPECT_DOUBLE_EQ(d.bins[18].upper, 0.95);
  EXPECT_EQ(d.bins[0].count, 0);
  EXPECT_TRUE(std::isnan(d.bins[0].mean_prediction));  // empty bins carry no mean
  EXPECT_NEAR(d.ece, 0.316, 1e-12);
}

TEST(CalibrationMetrics, EceClampsZeroAndOne) {
  // p = 0 is scored as 1e-8 (bin 0) and p = 1 as 1 - 1e-8 (bin 19): each bin is off by exactly 1e-8.
  const std::vector<double> p = {0.0, 1.0};
  const Labels y = {0, 1};
  const ReliabilityDiagram d = reliability_diagram(p, y);
  EXPECT_EQ(d.bins[0].count, 1);
  EXPECT_EQ(d.bins[19].count, 1);
  EXPECT_DOUBLE_EQ(d.bins[0].mean_prediction, 1e-8);
  EXPECT_DOUBLE_EQ(d.bins[19].mean_prediction, 1.0 - 1e-8);
  EXPECT_NEAR(d.ece, 1e-8, 1e-15);
  // Brier uses the same clamp: ((1e-8)^2 + (1e-8)^2) / 2 = 1e-16.
  EXPECT_NEAR(brier_score(p, y), 1e-16, 1e-22);
}

TEST(CalibrationMetrics, EceBinEdgeGoesUp) {
  // Bins are closed below: p = 0.05 is the lower edge of bin 1, not the upper edge of bin 0.
  const std::vector<double> p = {0.05, 0.5};
  const Labels y = {0, 1};
  const ReliabilityDiagram d = reliability_diagram(p, y);
  EXPECT_EQ(d.bins[0].count, 0);
  EXPECT_EQ(d.bins[1].count, 1);
  EXPECT_EQ(d.bins[10].count, 1);
}

TEST(CalibrationMetrics, AccumulatorStreamsTheSameDiagram) {
  // Adding the hand example one pair at a time gives the span function's ECE; clear() resets.
  const std::vector<double> p = {0.12, 0.61, 0.14, 0.92, 0.63};
  const Labels y = {0, 1, 1, 1, 1};
  ReliabilityAccumulator acc;
  for (size_t i = 0; i < p.size(); ++i) acc.add(p[i], y[i] != 0);
  EXPECT_EQ(acc.n_total(), 5);
  EXPECT_NEAR(acc.ece(), 0.316, 1e-12);
  EXPECT_EQ(acc.diagram().bins[12].count, 2);
  acc.clear();
  EXPECT_EQ(acc.n_total(), 0);
  EXPECT_TRUE(std::isnan(acc.ece()));
  test::expect_error([] { ReliabilityAccumulator bad(0); }, {"n_bins is 0"});
}

TEST(CalibrationMetrics, EmptyInputIsNaN) {
  const std::vector<double> p;
  const Labels y;
  EXPECT_TRUE(std::isnan(expected_calibration_error(p, y)));
  EXPECT_TRUE(std::isnan(roc_auc(p, y)));
  EXPECT_TRUE(std::isnan(brier_score(p, y)));
  EXPECT_EQ(reliability_diagram(p, y).n_total, 0);
}

TEST(CalibrationMetrics, BadInputThrows) {
  const std::vector<double> p = {0.2, 0.4};
  test::expect_error([&] { expected_calibration_error(p, Labels{1}); }, {"2 predictions", "1 labels"});
  test::expect_error([&] { roc_auc(p, Labels{0, 2}); }, {"label 1", "expected 0 or 1"});
  const std::vector<double> nan_p = {0.2, std::nan("")};
  test::expect_error([&] { brier_score(nan_p, Labels{0, 1}); }, {"prediction 1", "not finite"});
}

TEST(CalibrationMetrics, BrierHandComputed) {
  // ((0.2 - 0)^2 + (0.7 - 1)^2 + (0.5 - 1)^2) / 3 = (0.04 + 0.09 + 0.25) / 3 = 0.38 / 3
  const std::vector<double> p = {0.2, 0.7, 0.5};
  EXPECT_NEAR(brier_score(p, Labels{0, 1, 1}), 0.38 / 3.0, 1e-12);
}

TEST(CalibrationMetrics, AucPerfectAndReversed) {
  const std::vector<double> p = {0.1, 0.2, 0.8, 0.9};
  EXPECT_DOUBLE_EQ(roc_auc(p, Labels{0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(roc_auc(p, Labels{1, 1, 0, 0}), 0.0);
}

TEST(CalibrationMetrics, AucTiesInOneBinCountHalf) {
  // All in fine bin 500 ([0.500, 0.501)); the positives are even below the negatives, but the
  // histogram cannot see that: every pair is a tie, AUC = 0.5.
  const std::vector<double> p = {0.5004, 0.5003, 0.5001, 0.5002, 0.5};
  EXPECT_DOUBLE_EQ(roc_auc(p, Labels{0, 0, 1, 1, 0}), 0.5);
}

TEST(CalibrationMetrics, AucMixedHandComputed) {
  // Positives 0.4, 0.8; negatives 0.2, 0.6, 0.8. Pairs (pos beats neg = 1, tie = 1/2):
  //   0.4: beats 0.2                 -> 1
  //   0.8: beats 0.2, 0.6; ties 0.8  -> 2.5
  // AUC = 3.5 / (2 * 3) = 0.58333...
  const std::vector<double> p = {0.2, 0.4, 0.6, 0.8, 0.8};
  EXPECT_NEAR(roc_auc(p, Labels{0, 1, 0, 1, 0}), 3.5 / 6.0, 1e-12);
}

TEST(CalibrationMetrics, AucUndefinedWithoutBothClasses) {
  const std::vector<double> p = {0.3, 0.6};
  EXPECT_TRUE(std::isnan(roc_auc(p, Labels{1, 1})));
  EXPECT_TRUE(std::isnan(roc_auc(p, Labels{0, 0})));
}

TEST(CalibrationMetrics, AucMatchesExactPairwiseWithinQuantisation) {
  // n = 2000 seeded samples, y ~ Bernoulli(p) with p ~ U(0, 1): informative but imperfect ranking.
  // The histogram AUC differs from the exact Mann-Whitney AUC only on pairs sharing one of 1000
  // bins, about 1/1000 of pairs for a spread-out p, each off by at most 1/2; bound 1e-3.
  std::mt19937_64 rng(20240611);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<double> p(2000);
  Labels y(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = unif(rng);
    y[i] = unif(rng) < p[i] ? 1 : 0;
  }
  double pairs = 0.0, n_pos = 0.0, n_neg = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    (y[i] ? n_pos : n_neg) += 1.0;
    if (!y[i]) continue;
    for (size_t j = 0; j < p.size(); ++j)
      if (!y[j]) pairs += p[i] > p[j] ? 1.0 : (p[i] == p[j] ? 0.5 : 0.0);
  }
  const double exact = pairs / (n_pos * n_neg);
  EXPECT_GT(exact, 0.7);  // the data really rank (expected AUC of this model is 5/6)
  EXPECT_NEAR(roc_auc(p, y), exact, 1e-3);
}

}  // namespace
}  // namespace dspark::calibrate
