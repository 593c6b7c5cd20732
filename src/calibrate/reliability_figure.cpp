#include "calibrate/reliability_figure.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "calibrate/calibration_metrics.h"

namespace dspark::calibrate {

namespace {

plot::Panel reliability_panel(const PositionSamples& samples, const std::string& title) {
  const ReliabilityDiagram d = reliability_diagram(samples.predictions, samples.labels);
  plot::Panel p{.title = title, .x = {"predicted survival", 0.0, 1.0}, .y = {"realised prefix acceptance", 0.0, 1.0}};
  plot::Bars share{.name = "share of rounds", .width = 0.05, .opacity = 0.25};
  plot::Bars accuracy{.name = "acceptance in bin", .width = 0.045};
  for (const ReliabilityBin& b : d.bins) {
    if (b.count == 0) continue;
    const double center = 0.5 * (b.lower + b.upper);
    accuracy.x.push_back(center), accuracy.height.push_back(b.mean_label);
    share.x.push_back(center), share.height.push_back(static_cast<double>(b.count) / static_cast<double>(d.n_total));
  }
  p.bars = {accuracy, share};  // the faint share last, so it is not hidden behind the accuracy bars
  p.diagonal = true;
  p.legend = plot::LegendPos::kTopLeft;
  return p;
}

}  // namespace

plot::Figure reliability_figure(std::span<const Round> rounds, std::span<const double> temperatures, int n_positions) {
  plot::Figure f{.title = "Confidence calibration: before and after STS", .cols = 2, .panel_width = 380,
                 .panel_height = 300};
  const std::vector<double> raw(static_cast<size_t>(n_positions), 1.0);
  for (int k = 0; k < n_positions; ++k) {
    const PositionSamples before = position_samples(rounds, raw, k);
    if (before.predictions.empty()) continue;
    const PositionSamples after = position_samples(rounds, temperatures, k);
    char title[96];
    std::snprintf(title, sizeof title, "position %d raw (ECE %.3f)", k + 1,
                  expected_calibration_error(before.predictions, before.labels));
    f.panels.push_back(reliability_panel(before, title));
    std::snprintf(title, sizeof title, "position %d STS T=%.2f (ECE %.3f)", k + 1, temperatures[k],
                  expected_calibration_error(after.predictions, after.labels));
    f.panels.push_back(reliability_panel(after, title));
  }
  return f;
}

}  // namespace dspark::calibrate
