// The reliability diagrams of a calibration: per draft position, the realised prefix acceptance
// against the predicted survival (20 equal-width bins), before and after STS.
#pragma once
#include <span>

#include "calibrate/sts.h"
#include "plot/svg_chart.h"

namespace dspark::calibrate {

// Two panels per position (raw, calibrated) for the positions with data, side by side.
plot::Figure reliability_figure(std::span<const Round> rounds, std::span<const double> temperatures, int n_positions);

}  // namespace dspark::calibrate
