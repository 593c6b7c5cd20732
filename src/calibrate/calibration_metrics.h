// Calibration metrics of a binary predictor: reliability diagram, ECE, ROC-AUC and Brier score,
// defined exactly as DeepSpec's confidence-head evaluator computes them
// (deepspec/eval/dspark/confidence_head.py), so numbers compare with the paper's Figure 6.
//
// In DSpark, a prediction is the cumulative survival prod_{j<=k} c_j at slot k, and its label is
// the realised prefix acceptance (1 iff slots 0..k were all accepted). These functions know
// nothing about slots: the caller passes one position's (prediction, label) pairs.
//
// Conventions shared by every function here:
//  - predictions are clamped to [1e-8, 1 - 1e-8] before binning and scoring (DeepSpec's
//    EPS_PROB), so p = 0 and p = 1 are legal and land in the first and last bins;
//  - labels are 0 or 1;
//  - an empty input gives NaN, as DeepSpec reports for a position that was never reached: a
//    calibration error of nothing is undefined, and 0 would read as "perfectly calibrated";
//  - a size mismatch, a label other than 0 / 1 or a non-finite prediction throws dspark::Error.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "common/error.h"

namespace dspark::calibrate {

inline constexpr double kProbEps = 1e-8;    // the clamp applied to every prediction
inline constexpr int kEceBins = 20;         // equal-width bins of the reliability diagram / ECE
inline constexpr int kAucBins = 1000;       // equal-width histogram bins of the ROC-AUC

// One equal-width bin [lower, upper) of a reliability diagram (the last bin also holds 1 - 1e-8).
struct ReliabilityBin {
  double lower = 0.0;            // bin edges on the prediction axis
  double upper = 0.0;
  int64_t count = 0;             // predictions that fell in the bin
  double mean_prediction = 0.0;  // mean clamped prediction in the bin; NaN when count == 0
  double mean_label = 0.0;       // fraction of positive labels in the bin; NaN when count == 0
};

// What a reliability plot draws, and the ECE that summarises it.
struct ReliabilityDiagram {
  std::vector<ReliabilityBin> bins;  // [n_bins], empty bins included (count 0)
  int64_t n_total = 0;               // number of (prediction, label) pairs
  double ece = 0.0;                  // sum_b (count_b / n_total) |mean_prediction_b - mean_label_b|;
                                     // NaN when n_total == 0
};

// The reliability histogram, accumulated one pair at a time, for a recorder that sees rounds as
// they are verified (DeepSpec's evaluator accumulates the same sums per position). The bin of a
// clamped prediction p is floor(n_bins * p), clamped to [0, n_bins - 1], so p = 0.05 with 20 bins
// goes to bin 1 (bins are closed below, open above).
class ReliabilityAccumulator {
 public:
  explicit ReliabilityAccumulator(int n_bins = kEceBins);  // n_bins >= 1, else dspark::Error

  // prediction must be finite (a NaN has no bin); asserted, since this is called once per slot.
  void add(double prediction, bool label) {
    DSPARK_ASSERT(std::isfinite(prediction));
    const double p = std::clamp(prediction, kProbEps, 1.0 - kProbEps);
    const int b = bin_of(p, n_bins());
    count_[b] += 1;
    sum_pred_[b] += p;
    sum_label_[b] += label ? 1.0 : 0.0;
    n_total_ += 1;
  }
  void clear();

  int n_bins() const { return static_cast<int>(count_.size()); }
  int64_t n_total() const { return n_total_; }
  double ece() const;                 // NaN when nothing was added
  ReliabilityDiagram diagram() const;

  // Bin of a clamped prediction (the last-bin guard only matters if kProbEps ever becomes 0).
  static int bin_of(double clamped_p, int n_bins) {
    return std::min(static_cast<int>(clamped_p * n_bins), n_bins - 1);
  }

 private:
  std::vector<int64_t> count_;     // [n_bins]
  std::vector<double> sum_pred_;   // [n_bins] sum of clamped predictions
  std::vector<double> sum_label_;  // [n_bins] number of positive labels
  int64_t n_total_ = 0;
};

// The reliability diagram of a set of pairs (an empty set gives ece = NaN).
ReliabilityDiagram reliability_diagram(std::span<const double> predictions, std::span<const uint8_t> labels,
                                       int n_bins = kEceBins);

// Expected calibration error with 20 equal-width bins: reliability_diagram(...).ece. NaN if empty.
double expected_calibration_error(std::span<const double> predictions, std::span<const uint8_t> labels);

// ROC-AUC from 1000-bin histograms of the positives' and the negatives' predictions:
//   AUC = [sum_b pos_b * (negatives in bins below b) + 1/2 sum_b pos_b * neg_b] / (P * N).
// A positive and a negative in the same bin count 1/2 whatever their order, so the result differs
// from the exact pairwise AUC by at most half the fraction of (positive, negative) pairs sharing a
// bin. NaN when there are no positives or no negatives (the ranking is undefined).
double roc_auc(std::span<const double> predictions, std::span<const uint8_t> labels);

// Brier score: mean (p - y)^2 over clamped predictions p. NaN if empty.
double brier_score(std::span<const double> predictions, std::span<const uint8_t> labels);

}  // namespace dspark::calibrate
