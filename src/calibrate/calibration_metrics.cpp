#include "calibrate/calibration_metrics.h"

#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"

namespace dspark::calibrate {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Validates one metric's inputs; `metric` names the caller in the message.
void check_inputs(std::span<const double> predictions, std::span<const uint8_t> labels, const char* metric) {
  if (predictions.size() != labels.size())
    throw Error(std::string(metric) + ": " + std::to_string(predictions.size()) + " predictions but " +
                std::to_string(labels.size()) + " labels");
  for (size_t i = 0; i < predictions.size(); ++i) {
    if (!std::isfinite(predictions[i]))
      throw Error(std::string(metric) + ": prediction " + std::to_string(i) + " is not finite");
    if (labels[i] > 1)
      throw Error(std::string(metric) + ": label " + std::to_string(i) + " is " + std::to_string(labels[i]) +
                  ", expected 0 or 1");
  }
}

double clamp_prob(double p) { return std::clamp(p, kProbEps, 1.0 - kProbEps); }

}  // namespace

ReliabilityAccumulator::ReliabilityAccumulator(int n_bins) {
  if (n_bins < 1) throw Error("reliability diagram: n_bins is " + std::to_string(n_bins) + ", expected >= 1");
  count_.assign(n_bins, 0);
  sum_pred_.assign(n_bins, 0.0);
  sum_label_.assign(n_bins, 0.0);
}

void ReliabilityAccumulator::clear() {
  std::fill(count_.begin(), count_.end(), 0);
  std::fill(sum_pred_.begin(), sum_pred_.end(), 0.0);
  std::fill(sum_label_.begin(), sum_label_.end(), 0.0);
  n_total_ = 0;
}

double ReliabilityAccumulator::ece() const {
  if (n_total_ == 0) return kNaN;
  // count_b / N * |mean_pred_b - mean_label_b| = |sum_pred_b - sum_label_b| / N
  double sum = 0.0;
  for (int b = 0; b < n_bins(); ++b) sum += std::fabs(sum_pred_[b] - sum_label_[b]);
  return sum / static_cast<double>(n_total_);
}

ReliabilityDiagram ReliabilityAccumulator::diagram() const {
  ReliabilityDiagram out;
  out.bins.resize(n_bins());
  out.n_total = n_total_;
  out.ece = ece();
  for (int b = 0; b < n_bins(); ++b) {
    ReliabilityBin& bin = out.bins[b];
    bin.lower = static_cast<double>(b) / n_bins();
    bin.upper = static_cast<double>(b + 1) / n_bins();
    bin.count = count_[b];
    bin.mean_prediction = count_[b] == 0 ? kNaN : sum_pred_[b] / count_[b];
    bin.mean_label = count_[b] == 0 ? kNaN : sum_label_[b] / count_[b];
  }
  return out;
}

ReliabilityDiagram reliability_diagram(std::span<const double> predictions, std::span<const uint8_t> labels,
                                       int n_bins) {
  check_inputs(predictions, labels, "reliability_diagram");
  ReliabilityAccumulator acc(n_bins);
  for (size_t i = 0; i < predictions.size(); ++i) acc.add(predictions[i], labels[i] != 0);
  return acc.diagram();
}

double expected_calibration_error(std::span<const double> predictions, std::span<const uint8_t> labels) {
  return reliability_diagram(predictions, labels, kEceBins).ece;
}

double roc_auc(std::span<const double> predictions, std::span<const uint8_t> labels) {
  check_inputs(predictions, labels, "roc_auc");
  std::vector<double> pos(kAucBins, 0.0), neg(kAucBins, 0.0);  // [kAucBins] histograms
  for (size_t i = 0; i < predictions.size(); ++i) {
    const int b = ReliabilityAccumulator::bin_of(clamp_prob(predictions[i]), kAucBins);
    (labels[i] ? pos : neg)[b] += 1.0;
  }
  double n_pos = 0.0, n_neg = 0.0, pairs = 0.0;
  for (int b = 0; b < kAucBins; ++b) {
    pairs += pos[b] * n_neg + 0.5 * pos[b] * neg[b];  // n_neg so far = negatives in lower bins
    n_pos += pos[b];
    n_neg += neg[b];
  }
  if (n_pos == 0.0 || n_neg == 0.0) return kNaN;
  return pairs / (n_pos * n_neg);
}

double brier_score(std::span<const double> predictions, std::span<const uint8_t> labels) {
  check_inputs(predictions, labels, "brier_score");
  if (predictions.empty()) return kNaN;
  double sum = 0.0;
  for (size_t i = 0; i < predictions.size(); ++i) {
    const double d = clamp_prob(predictions[i]) - labels[i];
    sum += d * d;
  }
  return sum / static_cast<double>(predictions.size());
}

}  // namespace dspark::calibrate
