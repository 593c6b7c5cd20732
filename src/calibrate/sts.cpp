#include "calibrate/sts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "calibrate/calibration_metrics.h"

namespace dspark::calibrate {

namespace {

void check_rounds(std::span<const Round> rounds, size_t n_positions) {
  for (size_t r = 0; r < rounds.size(); ++r) {
    const Round& round = rounds[r];
    const size_t g = round.logits.size();
    if (g > n_positions)
      throw Error("STS: round " + std::to_string(r) + " has " + std::to_string(g) + " logits, more than the " +
                  std::to_string(n_positions) + " positions");
    if (round.accepted < 0 || static_cast<size_t>(round.accepted) > g)
      throw Error("STS: round " + std::to_string(r) + " accepted " + std::to_string(round.accepted) +
                  " of " + std::to_string(g) + " proposed slots");
    for (double z : round.logits)
      if (!std::isfinite(z)) throw Error("STS: round " + std::to_string(r) + " has a non-finite logit");
  }
}

void check_temperatures(std::span<const double> temperatures) {
  for (size_t k = 0; k < temperatures.size(); ++k)
    if (!(temperatures[k] > 0.0) || !std::isfinite(temperatures[k]))
      throw Error("STS: temperature " + std::to_string(k) + " is " + std::to_string(temperatures[k]) +
                  ", expected a finite value > 0");
}

void check_grid(const StsGrid& grid) {
  if (!(grid.t_min > 0.0) || !(grid.t_max > grid.t_min) || !std::isfinite(grid.t_max) || grid.n_coarse < 2 ||
      grid.n_refine < 2 || grid.n_levels < 0)
    throw Error("STS: bad grid t_min=" + std::to_string(grid.t_min) + " t_max=" + std::to_string(grid.t_max) +
                " n_coarse=" + std::to_string(grid.n_coarse) + " n_refine=" + std::to_string(grid.n_refine) +
                " n_levels=" + std::to_string(grid.n_levels));
}

// n points from lo to hi inclusive, equally spaced in log T.
std::vector<double> log_spaced(double lo, double hi, int n) {
  std::vector<double> out(n);
  const double step = std::log(hi / lo) / (n - 1);
  for (int i = 0; i < n; ++i) out[i] = lo * std::exp(step * i);
  return out;
}

// The rounds that proposed slot k, as columns.
struct Column {
  std::vector<size_t> round_ids;  // [n] index into rounds
  std::vector<double> logits;     // [n] logit at slot k
  std::vector<double> prefix;     // [n] a_{k-1} under the already fitted T_0..T_{k-1} (1 at k = 0)
  std::vector<uint8_t> labels;    // [n] [k < accepted]
};

Column gather_column(std::span<const Round> rounds, const std::vector<double>& survival, size_t k) {
  Column c;
  for (size_t r = 0; r < rounds.size(); ++r) {
    if (rounds[r].logits.size() <= k) continue;
    c.round_ids.push_back(r);
    c.logits.push_back(rounds[r].logits[k]);
    c.prefix.push_back(survival[r]);
    c.labels.push_back(static_cast<size_t>(rounds[r].accepted) > k ? 1 : 0);
  }
  return c;
}

// 20-bin ECE of a_k = prefix * sigmoid(logit / t) on the column: the fit's hot loop (55 passes per
// position with the default grid). ECE = sum_b |sum_{i in b} (p_i - y_i)| / n needs one sum per
// bin, not the three of a full reliability diagram; the clamp and the bins are those of
// ReliabilityAccumulator. Multiplying by 1/t instead of dividing moves a prediction by at most an
// ulp and makes the pass ~20% faster.
double column_ece(const Column& c, double t) {
  double gap[kEceBins] = {};  // [kEceBins] sum of (p - y) per bin
  const double inv_t = 1.0 / t;
  for (size_t i = 0; i < c.logits.size(); ++i) {
    const double p = std::clamp(c.prefix[i] * sigmoid(c.logits[i] * inv_t), kProbEps, 1.0 - kProbEps);
    gap[ReliabilityAccumulator::bin_of(p, kEceBins)] += p - c.labels[i];
  }
  double sum = 0.0;
  for (double g : gap) sum += std::fabs(g);
  return sum / static_cast<double>(c.logits.size());
}

struct Candidate {
  double t = 1.0;
  double ece = std::numeric_limits<double>::infinity();
};

// Strictly lower ECE wins; a tie goes to the temperature nearer 1, so flat directions stay unscaled.
bool better(const Candidate& a, const Candidate& b) {
  if (a.ece != b.ece) return a.ece < b.ece;
  return std::fabs(std::log(a.t)) < std::fabs(std::log(b.t));
}

// The index of the best candidate, scanning in order (so the result never depends on threads).
size_t best_of(const std::vector<Candidate>& cands) {
  size_t best = 0;
  for (size_t i = 1; i < cands.size(); ++i)
    if (better(cands[i], cands[best])) best = i;
  return best;
}

// Each grid point is a full pass over the column and independent of the others, so they run in
// parallel; each ECE is still summed serially, so the result is the same for any thread count.
std::vector<Candidate> score(const Column& c, const std::vector<double>& temperatures) {
  std::vector<Candidate> out(temperatures.size());
  const int64_t n = static_cast<int64_t>(temperatures.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = {temperatures[i], column_ece(c, temperatures[i])};
  return out;
}

// Coarse grid, then n_levels zooms: each scores n_refine points between the current best's two
// neighbours on the previous grid. Keeping the previous best as a candidate means a zoom can only
// lower the ECE.
double fit_position(const Column& c, const StsGrid& grid) {
  std::vector<Candidate> cands = score(c, log_spaced(grid.t_min, grid.t_max, grid.n_coarse));
  for (int level = 0; level < grid.n_levels; ++level) {
    const size_t i = best_of(cands);
    const Candidate best = cands[i];
    const double lo = cands[i == 0 ? 0 : i - 1].t;
    const double hi = cands[std::min(i + 1, cands.size() - 1)].t;
    cands = score(c, log_spaced(lo, hi, grid.n_refine));
    cands.push_back(best);
    std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.t < b.t; });
  }
  return cands[best_of(cands)].t;
}

// ROC-AUC of prod_{j<=k} exact_j against [k < accepted], over the rounds with exact values through k.
double exact_auc(std::span<const Round> rounds, int k) {
  std::vector<double> predictions;
  std::vector<uint8_t> labels;
  for (const Round& round : rounds) {
    if (round.exact.size() <= static_cast<size_t>(k)) continue;
    double a = 1.0;
    for (int j = 0; j <= k; ++j) a *= round.exact[static_cast<size_t>(j)];
    predictions.push_back(a);
    labels.push_back(round.accepted > k ? 1 : 0);
  }
  return roc_auc(predictions, labels);
}

}  // namespace

std::vector<double> cumulative_survival(std::span<const double> logits, std::span<const double> temperatures) {
  if (logits.size() > temperatures.size())
    throw Error("STS: " + std::to_string(logits.size()) + " logits but only " +
                std::to_string(temperatures.size()) + " temperatures");
  check_temperatures(temperatures.first(logits.size()));
  std::vector<double> out(logits.size());
  double a = 1.0;
  for (size_t k = 0; k < logits.size(); ++k) out[k] = a *= calibrated_confidence(logits[k], temperatures[k]);
  return out;
}

std::vector<double> fit_sts(std::span<const Round> rounds, int n_positions, const StsGrid& grid) {
  if (n_positions < 0) throw Error("STS: n_positions is " + std::to_string(n_positions));
  check_rounds(rounds, static_cast<size_t>(n_positions));
  check_grid(grid);
  std::vector<double> temperatures(n_positions, 1.0);
  std::vector<double> survival(rounds.size(), 1.0);  // [n_rounds] a_{k-1} under the fitted temperatures
  for (int k = 0; k < n_positions; ++k) {
    const Column c = gather_column(rounds, survival, k);
    if (c.round_ids.empty()) break;  // no round reached slot k, so none reaches a later one
    temperatures[k] = fit_position(c, grid);
    for (size_t i = 0; i < c.round_ids.size(); ++i)
      survival[c.round_ids[i]] = c.prefix[i] * calibrated_confidence(c.logits[i], temperatures[k]);
  }
  return temperatures;
}

PositionSamples position_samples(std::span<const Round> rounds, std::span<const double> temperatures,
                                 int position) {
  check_rounds(rounds, temperatures.size());
  check_temperatures(temperatures);
  PositionSamples out;
  if (position < 0) return out;
  const size_t k = static_cast<size_t>(position);
  for (const Round& round : rounds) {
    if (round.logits.size() <= k) continue;
    double a = 1.0;
    for (size_t j = 0; j <= k; ++j) a *= calibrated_confidence(round.logits[j], temperatures[j]);
    out.predictions.push_back(a);
    out.labels.push_back(static_cast<size_t>(round.accepted) > k ? 1 : 0);
  }
  return out;
}

std::vector<StsPositionReport> sts_report(std::span<const Round> rounds, std::span<const double> temperatures) {
  const std::vector<double> raw(temperatures.size(), 1.0);
  std::vector<StsPositionReport> out;
  for (int k = 0; k < static_cast<int>(temperatures.size()); ++k) {
    const PositionSamples before = position_samples(rounds, raw, k);
    const PositionSamples after = position_samples(rounds, temperatures, k);
    StsPositionReport rep;
    rep.position = k;
    rep.n = static_cast<int64_t>(after.labels.size());
    int64_t n_pos = 0;
    for (uint8_t y : after.labels) n_pos += y;
    rep.label_mean = rep.n == 0 ? std::nan("") : static_cast<double>(n_pos) / rep.n;
    rep.ece_before = expected_calibration_error(before.predictions, before.labels);
    rep.ece_after = expected_calibration_error(after.predictions, after.labels);
    rep.auc_before = roc_auc(before.predictions, before.labels);
    rep.auc_after = roc_auc(after.predictions, after.labels);
    rep.brier_before = brier_score(before.predictions, before.labels);
    rep.brier_after = brier_score(after.predictions, after.labels);
    rep.auc_exact = exact_auc(rounds, k);
    out.push_back(rep);
  }
  return out;
}

StsMeans sts_means(std::span<const StsPositionReport> positions) {
  StsMeans m;
  double weight = 0;
  for (const StsPositionReport& p : positions) {
    if (p.n == 0) continue;
    const double w = static_cast<double>(p.n);
    m.ece_before += w * p.ece_before, m.ece_after += w * p.ece_after, weight += w;
    if (!std::isnan(p.auc_after)) m.auc_after += w * p.auc_after;
    if (!std::isnan(p.auc_exact)) m.auc_exact += w * p.auc_exact;
  }
  m.ece_before /= weight, m.ece_after /= weight, m.auc_after /= weight, m.auc_exact /= weight;
  return m;
}

double ece_floor(std::span<const Round> rounds, std::span<const double> temperatures, int draws, sampling::Rng& rng) {
  check_rounds(rounds, temperatures.size());
  check_temperatures(temperatures);
  if (draws < 1) throw Error("ece_floor: draws must be >= 1, got " + std::to_string(draws));
  // Each proposed slot's calibrated confidence c and cumulative survival a, computed once: only the
  // labels change between draws.
  struct Slot {
    double confidence, survival;
  };
  std::vector<std::vector<Slot>> slots(rounds.size());
  for (size_t r = 0; r < rounds.size(); ++r) {
    double a = 1.0;
    for (size_t k = 0; k < rounds[r].logits.size(); ++k) {
      const double c = calibrated_confidence(rounds[r].logits[k], temperatures[k]);
      a *= c;
      slots[r].push_back({c, a});
    }
  }
  std::vector<ReliabilityAccumulator> positions(temperatures.size());
  std::vector<StsPositionReport> reports(temperatures.size());
  double sum = 0.0;
  for (int d = 0; d < draws; ++d) {
    for (ReliabilityAccumulator& p : positions) p.clear();
    for (const std::vector<Slot>& round : slots) {
      bool accepted = true;
      for (size_t k = 0; k < round.size(); ++k) {
        if (accepted) accepted = rng.uniform() < round[k].confidence;
        positions[k].add(round[k].survival, accepted);
      }
    }
    for (size_t k = 0; k < positions.size(); ++k) {
      reports[k].n = positions[k].n_total();
      reports[k].ece_after = positions[k].ece();
    }
    sum += sts_means(reports).ece_after;  // weighted over positions as every other mean here
  }
  return sum / draws;
}

}  // namespace dspark::calibrate
