#include "plot/svg_chart.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string_view>

#include "common/error.h"
#include "common/one_line_error.h"

namespace dspark::plot {

namespace {

constexpr double kFontSize = 12;
constexpr double kCharWidth = 7;        // rough width of a 12 px sans-serif glyph, for layout only
constexpr double kTickLength = 5;
constexpr double kFigureTitleHeight = 32;
constexpr double kPixelLimit = 1e5;     // far-off points are clamped so their coordinates stay short
constexpr const char* kGridColor = "#e5e5e5";
constexpr const char* kDiagonalColor = "#999999";

// Fixed-point, locale-independent; rounds -0.00 to 0.00 so equal pictures print equally.
std::string num(double v, int decimals = 2) {
  if (std::fabs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0.0;
  std::array<char, 64> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::fixed, decimals);
  return res.ec == std::errc() ? std::string(buf.data(), res.ptr) : std::string("0");
}

// XML text and attribute escaping. Control characters other than tab/newline are not allowed in
// XML 1.0 at all, so they are dropped rather than escaped.
std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += c;
    }
  }
  return out;
}

// One element, built attribute by attribute; every value is escaped.
class Tag {
 public:
  explicit Tag(std::string_view name) : name_(name), text_("<" + name_) {}
  Tag& attr(std::string_view key, std::string_view value) {
    text_ += ' ';
    text_ += key;
    text_ += "=\"" + escape(value) + "\"";
    return *this;
  }
  Tag& attr(std::string_view key, double value) { return attr(key, num(value)); }
  std::string closed() const { return text_ + "/>\n"; }
  std::string open() const { return text_ + ">\n"; }
  std::string with_text(std::string_view body) const { return text_ + ">" + escape(body) + "</" + name_ + ">\n"; }

 private:
  std::string name_, text_;
};

bool finite(double v) { return std::isfinite(v); }

// Data values to pixels along one axis; p0 is where d0 lands (the bottom edge for y).
struct Scale {
  double d0, d1, p0, p1;
  double operator()(double v) const {
    const double p = p0 + (v - d0) / (d1 - d0) * (p1 - p0);
    return std::clamp(p, -kPixelLimit, kPixelLimit);
  }
};

// A panel's plot area in pixels, and the maps into it.
struct Frame {
  double left, top, width, height;
  Scale x, y;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

// The finite values seen so far along one axis.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!finite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

struct AxisLayout {
  double lo, hi;
  std::vector<double> ticks;  // inside [lo, hi]
  int decimals;               // for the tick labels, enough to tell neighbouring ticks apart
};

// 10^e exactly (for |e| <= 22), so k * mant * 10^e lands on the double nearest the decimal value.
double pow10(int e) {
  double p = 1.0;
  for (int i = 0; i < std::abs(e); ++i) p *= 10.0;
  return p;
}

double tick_value(double k_mant, int e) { return e >= 0 ? k_mant * pow10(e) : k_mant / pow10(-e); }

int tick_decimals(const std::vector<double>& ticks) {
  if (ticks.size() < 2) return 2;
  const double step = ticks[1] - ticks[0];
  return std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-6)), 0, 12);
}

void check_fixed_ends(const Axis& axis, const char* which) {
  const auto bad = [](const std::optional<double>& v) { return v && !finite(*v); };
  if (bad(axis.min) || bad(axis.max))
    throw Error(std::string("plot: ") + which + " axis '" + axis.title + "': fixed min/max must be finite");
  if (axis.min && axis.max && !(*axis.min < *axis.max))
    throw Error(std::string("plot: ") + which + " axis '" + axis.title + "': fixed min " + num(*axis.min) +
                " is not below max " + num(*axis.max));
}

// Fixed ends stay; free ends cover the data and snap outwards to a nice tick.
AxisLayout layout_axis(const Axis& axis, Range data, int tick_count, const char* which) {
  check_fixed_ends(axis, which);
  if (data.empty()) data = {0.0, 1.0};
  double lo = axis.min.value_or(data.lo);
  double hi = axis.max.value_or(data.hi);
  if (lo > hi) {  // all the data lies beyond the one fixed end: start from that end alone
    if (axis.min) hi = lo;
    else lo = hi;
  }
  const std::vector<double> outer = nice_ticks(lo, hi, tick_count);
  if (!axis.min) lo = outer.front();
  if (!axis.max) hi = outer.back();
  AxisLayout layout{lo, hi, {}, 0};
  const double eps = 1e-9 * (hi - lo);
  for (double t : nice_ticks(lo, hi, tick_count))
    if (t >= lo - eps && t <= hi + eps) layout.ticks.push_back(t);
  layout.decimals = tick_decimals(layout.ticks);
  return layout;
}

// Bars without a width get 0.8 of the tightest spacing, so neighbours never overlap.
double bar_width(const Bars& bars) {
  if (bars.width > 0) return bars.width;
  std::vector<double> xs;
  for (double x : bars.x)
    if (finite(x)) xs.push_back(x);
  std::sort(xs.begin(), xs.end());
  double gap = std::numeric_limits<double>::infinity();
  for (size_t i = 1; i < xs.size(); ++i)
    if (xs[i] > xs[i - 1]) gap = std::min(gap, xs[i] - xs[i - 1]);
  return 0.8 * (finite(gap) ? gap : 1.0);
}

void check_panel(const Panel& panel) {
  for (const Series& s : panel.series)
    if (s.x.size() != s.y.size())
      throw Error("plot: series '" + s.name + "': x has " + std::to_string(s.x.size()) + " values, y has " +
                  std::to_string(s.y.size()));
  for (const Bars& b : panel.bars)
    if (b.x.size() != b.height.size())
      throw Error("plot: bars '" + b.name + "': x has " + std::to_string(b.x.size()) + " values, height has " +
                  std::to_string(b.height.size()));
}

void add_data_ranges(const Panel& panel, Range& xr, Range& yr) {
  for (const Series& s : panel.series)
    for (size_t i = 0; i < s.x.size(); ++i)
      if (finite(s.x[i]) && finite(s.y[i])) {
        xr.add(s.x[i]);
        yr.add(s.y[i]);
      }
  for (const Bars& b : panel.bars) {
    const double half = bar_width(b) / 2;
    for (size_t i = 0; i < b.x.size(); ++i) {
      if (!finite(b.x[i]) || !finite(b.height[i])) continue;
      xr.add(b.x[i] - half);
      xr.add(b.x[i] + half);
      yr.add(0.0);  // bars grow from 0, so 0 must be in view
      yr.add(b.height[i]);
    }
  }
}

// Empty colors take the palette in order over bars, then series: [bars..., series...].
std::vector<std::string> resolve_colors(const Panel& panel) {
  std::vector<std::string> colors;
  size_t next = 0;
  for (const Bars& b : panel.bars) colors.push_back(b.color.empty() ? palette_color(next++) : b.color);
  for (const Series& s : panel.series) colors.push_back(s.color.empty() ? palette_color(next++) : s.color);
  return colors;
}

double label_width(const std::string& text) { return kCharWidth * static_cast<double>(text.size()); }

// Margins leave room for the panel title, tick labels and axis titles.
Frame place_frame(const Panel& panel, const AxisLayout& ax, const AxisLayout& ay, double cell_x, double cell_y,
                  double cell_w, double cell_h) {
  double widest_label = 0;
  for (double t : ay.ticks) widest_label = std::max(widest_label, label_width(num(t, ay.decimals)));
  const double left = cell_x + (panel.y.title.empty() ? 8 : 26) + widest_label + kTickLength + 6;
  const double top = cell_y + (panel.title.empty() ? 14 : 32);
  const double bottom = cell_y + cell_h - (panel.x.title.empty() ? 28 : 46);
  const double right = cell_x + cell_w - 18;
  const double width = std::max(10.0, right - left), height = std::max(10.0, bottom - top);
  return {left, top, width, height, {ax.lo, ax.hi, left, left + width}, {ay.lo, ay.hi, top + height, top}};
}

std::string grid_and_ticks(const Frame& f, const AxisLayout& ax, const AxisLayout& ay) {
  std::string out;
  for (double t : ax.ticks) {
    const double px = f.x(t);
    out += Tag("line").attr("x1", px).attr("y1", f.top).attr("x2", px).attr("y2", f.bottom())
               .attr("stroke", kGridColor).closed();
    out += Tag("line").attr("x1", px).attr("y1", f.bottom()).attr("x2", px).attr("y2", f.bottom() + kTickLength)
               .attr("stroke", "black").closed();
    out += Tag("text").attr("x", px).attr("y", f.bottom() + kTickLength + kFontSize + 1)
               .attr("text-anchor", "middle").with_text(num(t, ax.decimals));
  }
  for (double t : ay.ticks) {
    const double py = f.y(t);
    out += Tag("line").attr("x1", f.left).attr("y1", py).attr("x2", f.right()).attr("y2", py)
               .attr("stroke", kGridColor).closed();
    out += Tag("line").attr("x1", f.left - kTickLength).attr("y1", py).attr("x2", f.left).attr("y2", py)
               .attr("stroke", "black").closed();
    out += Tag("text").attr("x", f.left - kTickLength - 3).attr("y", py + 4).attr("text-anchor", "end")
               .with_text(num(t, ay.decimals));
  }
  return out;
}

std::string axis_titles(const Panel& panel, const Frame& f, double cell_x) {
  std::string out;
  const double cx = f.left + f.width / 2, cy = f.top + f.height / 2;
  if (!panel.x.title.empty())
    out += Tag("text").attr("x", cx).attr("y", f.bottom() + kTickLength + 2 * kFontSize + 8)
               .attr("text-anchor", "middle").with_text(panel.x.title);
  if (!panel.y.title.empty()) {
    const double tx = cell_x + 16;
    out += Tag("text").attr("x", tx).attr("y", cy).attr("text-anchor", "middle")
               .attr("transform", "rotate(-90 " + num(tx) + " " + num(cy) + ")").with_text(panel.y.title);
  }
  if (!panel.title.empty())
    out += Tag("text").attr("x", cx).attr("y", f.top - 10).attr("text-anchor", "middle")
               .attr("font-size", 13).attr("font-weight", "bold").with_text(panel.title);
  return out;
}

std::string draw_bars(const Bars& bars, const std::string& color, const Frame& f) {
  std::string out;
  const double half = bar_width(bars) / 2;
  for (size_t i = 0; i < bars.x.size(); ++i) {
    if (!finite(bars.x[i]) || !finite(bars.height[i])) continue;
    const double x0 = f.x(bars.x[i] - half), x1 = f.x(bars.x[i] + half);
    const double y_top = f.y(std::max(bars.height[i], 0.0)), y_bottom = f.y(std::min(bars.height[i], 0.0));
    out += Tag("rect").attr("class", "bar").attr("x", x0).attr("y", y_top).attr("width", x1 - x0)
               .attr("height", y_bottom - y_top).attr("fill", color).attr("fill-opacity", bars.opacity)
               .attr("stroke", "white").attr("stroke-width", 0.5).closed();
  }
  return out;
}

std::string draw_diagonal(const Frame& f) {
  const double v0 = std::max(f.x.d0, f.y.d0), v1 = std::min(f.x.d1, f.y.d1);
  if (!(v0 < v1)) return "";  // the axes' ranges share no value, so y = x never shows
  return Tag("line").attr("class", "diagonal").attr("x1", f.x(v0)).attr("y1", f.y(v0)).attr("x2", f.x(v1))
      .attr("y2", f.y(v1)).attr("stroke", kDiagonalColor).attr("stroke-dasharray", "4 4").closed();
}

// One path per series; a non-finite point lifts the pen, so the line breaks there as in matplotlib.
std::string draw_series(const Series& s, const std::string& color, const Frame& f) {
  std::string d;
  bool pen_down = false;
  for (size_t i = 0; i < s.x.size(); ++i) {
    if (!finite(s.x[i]) || !finite(s.y[i])) {
      pen_down = false;
      continue;
    }
    const double px = f.x(s.x[i]), py = f.y(s.y[i]);
    if (!d.empty()) d += ' ';
    d += pen_down ? 'L' : 'M';
    d += num(px) + " " + num(py);
    pen_down = true;
  }
  if (d.empty()) return "";
  Tag path("path");
  path.attr("class", "series").attr("d", d).attr("fill", "none").attr("stroke", color).attr("stroke-width", 2)
      .attr("stroke-linejoin", "round");
  if (s.dashed) path.attr("stroke-dasharray", "6 4");
  return path.closed();
}


struct LegendEntry {
  std::string name, color;
  bool bar, markers, dashed;
  double opacity;
};

std::vector<LegendEntry> legend_entries(const Panel& panel, const std::vector<std::string>& colors) {
  std::vector<LegendEntry> entries;
  size_t c = 0;
  for (const Bars& b : panel.bars) {
    if (!b.name.empty()) entries.push_back({b.name, colors[c], true, false, false, b.opacity});
    ++c;
  }
  for (const Series& s : panel.series) {
    if (!s.name.empty()) entries.push_back({s.name, colors[c], false, s.markers, s.dashed, 1.0});
    ++c;
  }
  return entries;
}

std::string legend_swatch(const LegendEntry& e, double x, double y) {
  if (e.bar)
    return Tag("rect").attr("x", x).attr("y", y - 5).attr("width", 20).attr("height", 10).attr("fill", e.color)
        .attr("fill-opacity", e.opacity).closed();
  Tag line("line");
  line.attr("x1", x).attr("y1", y).attr("x2", x + 20).attr("y2", y).attr("stroke", e.color).attr("stroke-width", 2);
  if (e.dashed) line.attr("stroke-dasharray", "6 4");
  std::string out = line.closed();
  if (e.markers) out += Tag("circle").attr("cx", x + 10).attr("cy", y).attr("r", 3).attr("fill", e.color).closed();
  return out;
}

std::string draw_legend(const Panel& panel, const std::vector<std::string>& colors, const Frame& f) {
  const std::vector<LegendEntry> entries = legend_entries(panel, colors);
  if (entries.empty() || panel.legend == LegendPos::kNone) return "";
  double text_w = 0;
  for (const LegendEntry& e : entries) text_w = std::max(text_w, label_width(e.name));
  const double row_h = 16, pad = 6, w = 2 * pad + 26 + text_w;
  const double h = 2 * pad + row_h * static_cast<double>(entries.size());
  const bool left = panel.legend == LegendPos::kTopLeft || panel.legend == LegendPos::kBottomLeft;
  const bool top = panel.legend == LegendPos::kTopLeft || panel.legend == LegendPos::kTopRight;
  const double x = left ? f.left + 8 : f.right() - 8 - w, y = top ? f.top + 8 : f.bottom() - 8 - h;
  std::string out = Tag("rect").attr("class", "legend").attr("x", x).attr("y", y).attr("width", w)
                        .attr("height", h).attr("fill", "white").attr("fill-opacity", 0.85)
                        .attr("stroke", "#cccccc").closed();
  for (size_t i = 0; i < entries.size(); ++i) {
    const double row_y = y + pad + row_h * (static_cast<double>(i) + 0.5);
    out += legend_swatch(entries[i], x + pad, row_y);
    out += Tag("text").attr("x", x + pad + 26).attr("y", row_y + 4).with_text(entries[i].name);
  }
  return out;
}

// Everything a panel draws inside its plot area, clipped to it so fixed ranges cut lines cleanly.
std::string plot_contents(const Panel& panel, const std::vector<std::string>& colors, const Frame& f,
                          const std::string& clip_id) {
  std::string out = Tag("clipPath").attr("id", clip_id).open();
  out += Tag("rect").attr("x", f.left).attr("y", f.top).attr("width", f.width).attr("height", f.height).closed();
  out += "</clipPath>\n" + Tag("g").attr("clip-path", "url(#" + clip_id + ")").open();
  size_t c = 0;
  for (const Bars& b : panel.bars) out += draw_bars(b, colors[c++], f);
  if (panel.diagonal) out += draw_diagonal(f);
  for (const Series& s : panel.series) out += draw_series(s, colors[c++], f);
  return out + "</g>\n";
}

// Markers are drawn unclipped, over the frame, so a dot on the plot area's edge shows whole; dots
// beyond the axis ranges are left out instead.
std::string draw_markers(const Panel& panel, const std::vector<std::string>& colors, const Frame& f) {
  const auto inside = [](double v, const Scale& scale) { return v >= scale.d0 && v <= scale.d1; };
  std::string out;
  for (size_t k = 0; k < panel.series.size(); ++k) {
    const Series& s = panel.series[k];
    const std::string& color = colors[panel.bars.size() + k];
    for (size_t i = 0; s.markers && i < s.x.size(); ++i)
      if (inside(s.x[i], f.x) && inside(s.y[i], f.y))  // false for NaN and inf too
        out += Tag("circle").attr("cx", f.x(s.x[i])).attr("cy", f.y(s.y[i])).attr("r", 3).attr("fill", color)
                   .closed();
  }
  return out;
}

std::string render_panel(const Panel& panel, size_t index, double cell_x, double cell_y, double cell_w,
                         double cell_h) {
  Range xr, yr;
  add_data_ranges(panel, xr, yr);
  const AxisLayout ax = layout_axis(panel.x, xr, 6, "x");
  const AxisLayout ay = layout_axis(panel.y, yr, 5, "y");
  const Frame f = place_frame(panel, ax, ay, cell_x, cell_y, cell_w, cell_h);
  const std::vector<std::string> colors = resolve_colors(panel);
  std::string out = Tag("g").attr("class", "panel").open();
  out += grid_and_ticks(f, ax, ay);
  out += plot_contents(panel, colors, f, "panel" + std::to_string(index) + "-area");
  out += Tag("rect").attr("class", "plot-area").attr("x", f.left).attr("y", f.top).attr("width", f.width)
             .attr("height", f.height).attr("fill", "none").attr("stroke", "black").closed();
  out += draw_markers(panel, colors, f);
  out += axis_titles(panel, f, cell_x);
  out += draw_legend(panel, colors, f);
  return out + "</g>\n";
}

void check_figure(const Figure& figure) {
  if (figure.cols < 1) throw Error("plot: figure '" + figure.title + "': cols must be >= 1, got " +
                                   std::to_string(figure.cols));
  if (!(figure.panel_width >= 100 && figure.panel_height >= 80 && figure.panel_width <= 1e5 &&
        figure.panel_height <= 1e5))
    throw Error("plot: figure '" + figure.title + "': panel size " + num(figure.panel_width) + "x" +
                num(figure.panel_height) + " outside [100, 1e5] x [80, 1e5]");
  for (const Panel& p : figure.panels) check_panel(p);
}

}  // namespace

const std::string& palette_color(size_t i) {
  // Okabe & Ito (2008), black moved last so the first series are coloured.
  static const std::array<std::string, 8> kPalette = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                                       "#56B4E9", "#CC79A7", "#F0E442", "#000000"};
  return kPalette[i % kPalette.size()];
}

std::vector<double> nice_ticks(double lo, double hi, int target_count) {
  if (!finite(lo) || !finite(hi) || lo > hi)
    throw Error("plot: cannot place ticks on [" + num(lo) + ", " + num(hi) + "]");
  if (lo == hi) {  // one value: centre it in a small range of its own scale
    const double pad = lo == 0 ? 1.0 : 0.1 * std::fabs(lo);
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target_count);
  if (!finite(raw) || raw <= 0) throw Error("plot: cannot place ticks on [" + num(lo) + ", " + num(hi) + "]");
  // step = mant x 10^e with mant in {1, 2, 5}: the smallest such step >= raw
  int e = static_cast<int>(std::floor(std::log10(raw)));
  const double norm = raw / std::pow(10.0, e);
  int mant = norm <= 1 + 1e-9 ? 1 : norm <= 2 + 1e-9 ? 2 : norm <= 5 + 1e-9 ? 5 : 10;
  if (mant == 10) mant = 1, ++e;
  const double step = tick_value(mant, e);
  const double k0 = std::floor(lo / step + 1e-9), k1 = std::ceil(hi / step - 1e-9);
  if (!(k1 - k0 <= 1000)) throw Error("plot: cannot place ticks on [" + num(lo) + ", " + num(hi) + "]");
  std::vector<double> ticks;
  for (double k = k0; k <= k1; ++k) ticks.push_back(tick_value(k * mant, e));
  return ticks;
}

std::string render_svg(const Figure& figure) {
  check_figure(figure);
  const size_t cols = static_cast<size_t>(figure.cols);
  const size_t rows = std::max<size_t>(1, (figure.panels.size() + cols - 1) / cols);
  const double title_h = figure.title.empty() ? 0 : kFigureTitleHeight;
  const double width = figure.panel_width * static_cast<double>(cols);
  const double height = title_h + figure.panel_height * static_cast<double>(rows);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
  out += Tag("svg").attr("xmlns", "http://www.w3.org/2000/svg").attr("version", "1.1").attr("width", width)
             .attr("height", height).attr("viewBox", "0 0 " + num(width) + " " + num(height))
             .attr("font-family", "sans-serif").attr("font-size", kFontSize).open();
  out += Tag("rect").attr("width", width).attr("height", height).attr("fill", "white").closed();
  if (!figure.title.empty())
    out += Tag("text").attr("class", "figure-title").attr("x", width / 2).attr("y", 22)
               .attr("text-anchor", "middle").attr("font-size", 16).attr("font-weight", "bold")
               .with_text(figure.title);
  for (size_t i = 0; i < figure.panels.size(); ++i)
    out += render_panel(figure.panels[i], i, figure.panel_width * static_cast<double>(i % cols),
                        title_h + figure.panel_height * static_cast<double>(i / cols), figure.panel_width,
                        figure.panel_height);
  return out + "</svg>\n";
}

void write_svg(const std::filesystem::path& path, const Figure& figure) {
  const std::string svg = render_svg(figure);  // before opening, so bad input leaves no empty file
  std::ofstream out(path, std::ios::binary);
  if (!out) fail_one_line(path.string(), std::string("cannot open for writing (") + std::strerror(errno) + ")");
  out << svg;
  out.close();
  if (!out) fail_one_line(path.string(), "write failed");
}

}  // namespace dspark::plot
