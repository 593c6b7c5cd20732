// Charts as standalone SVG 1.1 files, so benchmarks and calibration can draw their figures with
// no Python or plotting library.
//
// A Figure is a grid of Panels (row-major, `cols` per row); each Panel has two linear axes and
// draws, bottom to top: grid lines, its Bars, the y = x diagonal if asked, then its Series.
// That covers line charts (acceptance per position, tau vs threshold, throughput vs tokens/s per
// user) and reliability diagrams (accuracy bars over a faint count histogram, plus the diagonal).
//
// Conventions:
//  - Non-finite values are not drawn: a line breaks at a NaN/inf point, a bar with one is left out.
//  - Colors left empty take the fixed Okabe-Ito palette in order over the panel's bars, then its
//    series, so the same series order gives the same colors in every panel and every run.
//  - Output is deterministic: same Figure, byte-identical SVG (coordinates printed with 2 decimals).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dspark::plot {

struct Axis {
  std::string title;
  // Fixed ends, e.g. {0, 1} for probabilities. An end left unset comes from the data and is
  // widened to the enclosing nice tick.
  std::optional<double> min{}, max{};
};

// A line through (x[i], y[i]) in the given order.
struct Series {
  std::string name;            // legend entry; empty: not in the legend
  std::vector<double> x{}, y{};  // [n_points] each
  bool markers = false;        // a dot at every point inside the axis ranges
  bool dashed = false;
  std::string color{};         // any SVG color; empty: the next palette color
};

// Vertical bars from 0 to height[i], centered on x[i].
struct Bars {
  std::string name;              // legend entry; empty: not in the legend
  std::vector<double> x{}, height{};  // [n_bars] each
  // In x units; 0: 0.8 x the smallest gap between neighbouring x (0.8 for a single bar).
  double width = 0.0;
  double opacity = 1.0;          // fill opacity; e.g. 0.25 for a count histogram behind accuracy bars
  std::string color{};           // any SVG color; empty: the next palette color
};

enum class LegendPos { kTopRight, kTopLeft, kBottomRight, kBottomLeft, kNone };

struct Panel {
  std::string title;
  Axis x, y;
  std::vector<Bars> bars{};
  std::vector<Series> series{};
  bool diagonal = false;  // dashed grey y = x, for reliability diagrams
  LegendPos legend = LegendPos::kTopRight;
};

struct Figure {
  std::string title;
  std::vector<Panel> panels{};  // row-major; the last row may be partly empty
  int cols = 1;
  double panel_width = 420, panel_height = 320;  // pixels per grid cell
};

// The palette's i-th color (wraps around): Okabe-Ito, chosen to stay distinct for colorblind readers.
const std::string& palette_color(size_t i);

// Ticks at k x step, step the smallest of {1, 2, 5} x 10^e that is >= (hi - lo) / target_count;
// the first tick is <= lo and the last >= hi. lo == hi is widened around the value. Throws dspark::Error
// if lo or hi is not finite or lo > hi.
std::vector<double> nice_ticks(double lo, double hi, int target_count = 5);

// The whole SVG document. Throws dspark::Error on malformed input (x and y of different lengths,
// cols < 1, a panel size outside [100, 1e5] x [80, 1e5] px, an axis whose fixed min is not below
// its max).
std::string render_svg(const Figure& figure);

// render_svg written to `path`; throws dspark::Error "<path>: cannot open for writing (...)".
void write_svg(const std::filesystem::path& path, const Figure& figure);

}  // namespace dspark::plot
