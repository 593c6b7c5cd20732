// Sequential Temperature Scaling (STS, DSpark paper section 3.2.1): one temperature per draft slot,
// fitted on held-out verification rounds, so that the cumulative survival
//   a_k = prod_{j<=k} sigmoid(logit_j / T_j)
// is a calibrated probability that slots 0..k are all accepted. The scheduler needs absolute
// probabilities (it sums them into expected accepted lengths), and the raw head is over-confident.
//
// Fit: for k = 0, 1, ..., n_positions - 1 in order, T_0..T_{k-1} stay at their fitted values and a
// 1-D grid search picks the T_k that minimises the 20-bin ECE of a_k against the realised prefix
// acceptance [k < accepted], over the rounds that proposed slot k. Positions are fitted left to
// right because a_k depends on every earlier temperature, never on a later one.
//
// Temperature scaling is monotone in each logit, but a_k multiplies slots whose temperatures
// differ, so the ranking of a_k across rounds (its ROC-AUC) can move a little for k >= 1; the
// report gives the AUC before and after.
#pragma once
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "common/error.h"
#include "sampling/rng.h"

namespace dspark::calibrate {

// One verification round of the validation set.
struct Round {
  std::vector<double> logits;  // [g] confidence logits of the proposed slots, g <= n_positions
  int accepted = 0;            // drafted slots the target accepted, 0..g; slot k's label is [k < accepted]
  std::vector<double> exact;   // [<= g] optional: each slot's exact acceptance probability 1 - TV(p, q),
                               // what a perfect head would predict (StsPositionReport::auc_exact)
};

// The temperature grid. Coarse: n_coarse points log-spaced on [t_min, t_max]; with the defaults,
// neighbours are 400^(1/32) ~ 20.6% apart and the middle point is T = 1. Then n_levels zooms, each
// scoring n_refine points log-spaced between the current best's two neighbours: steps of ~3.8%,
// then ~0.75% with the defaults, finer than the spread of the fit itself (a few per cent at 100k
// rounds). 55 ECE passes per position; a pass over 100k rounds costs well under a millisecond.
// A zoom keeps the current best unless a point beats it strictly; among equal ECEs the T nearest 1
// (in |log T|) wins, so flat or degenerate positions stay unscaled.
struct StsGrid {
  double t_min = 0.05;
  double t_max = 20.0;
  int n_coarse = 33;
  int n_refine = 11;
  int n_levels = 2;
};

inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }  // exp overflow gives 0, not NaN

// The calibrated per-slot confidence c = sigmoid(logit / temperature); temperature > 0.
inline double calibrated_confidence(double logit, double temperature) {
  DSPARK_ASSERT(temperature > 0.0);
  return sigmoid(logit / temperature);
}

// a_k = prod_{j<=k} calibrated_confidence(logits[j], temperatures[j]) for k < logits.size().
// logits: [g]; temperatures: [n_positions], g <= n_positions, each > 0 (else dspark::Error).
std::vector<double> cumulative_survival(std::span<const double> logits, std::span<const double> temperatures);

// Fits temperatures: [n_positions]. A position that no round proposed keeps T = 1. Throws
// dspark::Error on a round with more than n_positions logits, a non-finite logit, accepted outside
// [0, g], or a bad grid.
std::vector<double> fit_sts(std::span<const Round> rounds, int n_positions, const StsGrid& grid = {});

// The (prediction, label) pairs of one slot position, over the rounds that proposed it: what the
// metrics and the reliability plot of that position consume.
struct PositionSamples {
  std::vector<double> predictions;  // [n] cumulative survival a_k under the given temperatures
  std::vector<uint8_t> labels;      // [n] realised prefix acceptance [k < accepted]
};
PositionSamples position_samples(std::span<const Round> rounds, std::span<const double> temperatures,
                                 int position);

// Per-position effect of a set of temperatures, against the raw head (all T = 1).
struct StsPositionReport {
  int position = 0;
  int64_t n = 0;              // rounds that proposed this slot; metrics below are NaN when 0
  double label_mean = 0.0;    // realised prefix-acceptance rate at this slot
  double ece_before = 0.0;    // 20-bin ECE of the raw cumulative survival
  double ece_after = 0.0;     // ... of the temperature-scaled one
  double auc_before = 0.0;    // 1000-bin ROC-AUC, raw
  double auc_after = 0.0;     // ... scaled
  double brier_before = 0.0;
  double brier_after = 0.0;
  // ROC-AUC of the exact prefix-acceptance probability prod_{j<=k} (1 - TV(p_j, q_j)), over the
  // rounds that carry it: the ranking a perfect confidence head would reach on these rounds (its
  // labels are still Bernoulli draws), so the ceiling of auc_after. NaN without exact values.
  double auc_exact = 0.0;
};
// temperatures: [n_positions]; one report per position.
std::vector<StsPositionReport> sts_report(std::span<const Round> rounds, std::span<const double> temperatures);

// The reports' metrics averaged over positions, weighted by their rounds (positions without
// rounds left out); a NaN AUC adds nothing but keeps its weight. NaN when no position has rounds.
struct StsMeans {
  double ece_before = 0.0, ece_after = 0.0, auc_after = 0.0, auc_exact = 0.0;
};
StsMeans sts_means(std::span<const StsPositionReport> positions);

inline constexpr int kEceFloorDraws = 200;

// The position-weighted mean ECE (weighted as sts_means weighs it) that a perfectly calibrated
// head would show on these rounds: the same predictions a_k, each round's labels redrawn from them
// (slot k accepted with probability sigmoid(logit_k / T_k) once the slots before it were, so the
// labels stay nested as realised prefixes are), averaged over `draws` redraws. A binned ECE is
// biased upward by the sampling noise of each bin's label mean (about sqrt(p (1 - p) / n_b) per
// bin): a perfect head reads 2-3% at a thousand rounds and 1.4% at four thousand (7 slots, this
// repository's drafter), so a measured ECE says how well a head is calibrated only beside this
// floor. NaN when no round proposes a slot; draws >= 1 and the checks of fit_sts, else dspark::Error.
// `bench accept` and `calibrate` report it with kEceFloorDraws redraws from Rng(0).
double ece_floor(std::span<const Round> rounds, std::span<const double> temperatures, int draws, sampling::Rng& rng);

}  // namespace dspark::calibrate
