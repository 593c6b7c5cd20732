#include "plot/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "common/error.h"
#include "expect_error.h"
#include "test_util.h"

namespace dspark::plot {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Just enough of an XML checker for our output: one root element, every <tag ...> closed by its
// own </tag> in order or self-closed, attribute values quoted, and every '&' starting an entity.
// Returns "" if well formed, else what is wrong and where.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  int n_roots = 0;
  for (size_t i = 0; i < xml.size(); ++i) {
    if (xml[i] == '&') {
      static const std::regex kEntity("^&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);");
      if (!std::regex_search(xml.substr(i, 10), kEntity)) return "bare '&' at " + std::to_string(i);
      continue;
    }
    if (xml[i] != '<') continue;
    if (xml.compare(i, 2, "<?") == 0) {
      i = xml.find("?>", i);
      if (i == std::string::npos) return "unterminated <?";
      continue;
    }
    bool in_quote = false;
    size_t end = i + 1;
    for (; end < xml.size() && (in_quote || xml[end] != '>'); ++end) {
      if (xml[end] == '"') in_quote = !in_quote;
      if (!in_quote && xml[end] == '<') return "'<' inside a tag at " + std::to_string(end);
    }
    if (end >= xml.size()) return "unterminated tag at " + std::to_string(i);
    const std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.empty()) return "empty tag at " + std::to_string(i);
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "unexpected </" + tag.substr(1) + ">";
      open.pop_back();
    } else {
      const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
      if (open.empty() && ++n_roots > 1) return "second root element <" + name + ">";
      if (tag.back() != '/') open.push_back(name);
    }
    i = end;
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  return n_roots == 1 ? "" : "no root element";
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

// The d="..." of every series path, in order.
std::vector<std::string> series_paths(const std::string& svg) {
  static const std::regex kPath("<path class=\"series\" d=\"([^\"]*)\"");
  std::vector<std::string> paths;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kPath); it != std::sregex_iterator(); ++it)
    paths.push_back((*it)[1]);
  return paths;
}

// All numbers of a path's d attribute, as x, y pairs flattened.
std::vector<double> path_numbers(const std::string& d) {
  static const std::regex kNumber("-?[0-9]+\\.[0-9]+");
  std::vector<double> values;
  for (auto it = std::sregex_iterator(d.begin(), d.end(), kNumber); it != std::sregex_iterator(); ++it)
    values.push_back(std::stod(it->str()));
  return values;
}

double attribute(const std::string& element, const std::string& name) {
  const std::regex re(" " + name + "=\"(-?[0-9.]+)\"");
  std::smatch m;
  if (!std::regex_search(element, m, re)) ADD_FAILURE() << name << " not in " << element;
  return m.empty() ? kNaN : std::stod(m[1]);
}

std::string first_element(const std::string& svg, const std::string& start) {
  const size_t pos = svg.find(start);
  if (pos == std::string::npos) return "";
  return svg.substr(pos, svg.find('>', pos) - pos + 1);
}

Series line(std::string name, std::vector<double> x, std::vector<double> y) {
  return Series{.name = std::move(name), .x = std::move(x), .y = std::move(y)};
}

Figure one_panel(Panel panel, std::string title = "t") {
  return Figure{.title = std::move(title), .panels = {std::move(panel)}};
}

// Acceptance per position for three drafters plus a 2 x 2 grid of reliability diagrams: every
// feature in one figure.
Figure sample_figure() {
  Panel accept{.title = "acceptance", .x = {.title = "position"}, .y = {.title = "p", .min = 0, .max = 1}};
  accept.series = {line("dspark", {1, 2, 3, 4}, {0.9, 0.8, 0.7, 0.6}),
                   line("eagle3", {1, 2, 3, 4}, {0.85, 0.7, 0.55, 0.4}),
                   line("ngram", {1, 2, 3, 4}, {0.5, 0.3, kNaN, 0.1})};
  accept.series[0].markers = true;
  Figure fig{.title = "Figure <2> & \"friends\"", .cols = 2};
  fig.panels.push_back(accept);
  for (int k = 0; k < 3; ++k) {
    Panel rel{.title = "position " + std::to_string(k), .x = {.title = "confidence", .min = 0, .max = 1},
              .y = {.title = "accuracy", .min = 0, .max = 1}, .diagonal = true, .legend = LegendPos::kTopLeft};
    rel.bars = {Bars{.name = "count", .x = {0.25, 0.75}, .height = {0.3, 0.7}, .width = 0.5, .opacity = 0.25,
                     .color = "#888888"},
                Bars{.name = "accuracy", .x = {0.25, 0.75}, .height = {0.2, 0.8 - 0.1 * k}, .width = 0.5}};
    fig.panels.push_back(rel);
  }
  return fig;
}

TEST(SvgChartTicks, CoverTheRangeWithOneTwoFiveSteps) {
  EXPECT_EQ(nice_ticks(0, 0.87), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0}));
  EXPECT_EQ(nice_ticks(3, 97), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(0, 1), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0}));
  EXPECT_EQ(nice_ticks(-0.3, 0.3), (std::vector<double>{-0.4, -0.2, 0, 0.2, 0.4}));
  EXPECT_EQ(nice_ticks(1, 7, 6), (std::vector<double>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(nice_ticks(1200, 48000), (std::vector<double>{0, 10000, 20000, 30000, 40000, 50000}));
  EXPECT_EQ(nice_ticks(0.0013, 0.0041), (std::vector<double>{0.001, 0.002, 0.003, 0.004, 0.005}));
}

TEST(SvgChartTicks, WidenASingleValueAndRejectBadRanges) {
  const std::vector<double> around_five = nice_ticks(5, 5);
  ASSERT_GE(around_five.size(), 2u);
  EXPECT_LT(around_five.front(), 5);
  EXPECT_GT(around_five.back(), 5);
  EXPECT_EQ(nice_ticks(0, 0).front(), -1);
  test::expect_error([] { nice_ticks(1, 0); }, {"ticks", "[1.00, 0.00]"});
  test::expect_error([] { nice_ticks(0, kNaN); }, {"ticks"});
  test::expect_error([] { nice_ticks(-kInf, 0); }, {"ticks"});
}

TEST(SvgChart, OutputIsWellFormedStandaloneSvg) {
  const std::string svg = render_svg(sample_figure());
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(svg.rfind("<?xml version=\"1.0\"", 0), 0u);
  const std::string root = first_element(svg, "<svg ");
  EXPECT_NE(root.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos) << root;
  EXPECT_NE(root.find("viewBox=\"0 0 840.00 672.00\""), std::string::npos) << root;  // 2 x 2 cells + title
  EXPECT_EQ(count(svg, "<g class=\"panel\">"), 4u);
  // the checker itself must catch what it is for
  EXPECT_NE(xml_problem("<svg><g></svg></g>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
}

TEST(SvgChart, EscapesText) {
  Panel panel{.title = "it's"};
  panel.series = {line("a<b", {0, 1}, {0, 1})};
  const std::string svg = render_svg(one_panel(panel, "x < y & \"z\""));
  EXPECT_NE(svg.find(">x &lt; y &amp; &quot;z&quot;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">it&apos;s</text>"), std::string::npos);
  EXPECT_NE(svg.find(">a&lt;b</text>"), std::string::npos);
  EXPECT_EQ(svg.find("x < y"), std::string::npos);
  EXPECT_EQ(xml_problem(svg), "");
}

TEST(SvgChart, OnePathPerNonEmptySeriesWithItsPoints) {
  Panel panel;
  panel.series = {line("four", {1, 2, 3, 4}, {1, 4, 9, 16}), line("empty", {}, {}), line("two", {1, 4}, {2, 3})};
  const std::string svg = render_svg(one_panel(panel));
  const std::vector<std::string> paths = series_paths(svg);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(count(paths[0], "M") + count(paths[0], "L"), 4u);
  EXPECT_EQ(count(paths[1], "M") + count(paths[1], "L"), 2u);
  EXPECT_EQ(count(svg, "<circle"), 0u);  // markers are off by default
}

TEST(SvgChart, NonFinitePointsAreSkippedAndBreakTheLine) {
  Panel panel;
  panel.series = {line("gappy", {1, 2, 3, 4, kNaN, 6}, {1, 2, kNaN, 4, 5, kInf})};
  panel.series[0].markers = true;
  panel.bars = {Bars{.x = {1, 2, 3}, .height = {1, kNaN, 2}}};
  panel.legend = LegendPos::kNone;  // its swatch would add a circle
  const std::string svg = render_svg(one_panel(panel));
  for (const char* bad : {"nan", "NaN", "inf"}) EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
  const std::vector<std::string> paths = series_paths(svg);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(count(paths[0], "M"), 2u) << paths[0];  // (1,1)-(2,2), then (4,4) alone
  EXPECT_EQ(count(paths[0], "L"), 1u) << paths[0];
  EXPECT_EQ(count(svg, "<circle"), 3u);
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 2u);
}

TEST(SvgChart, AllNonFiniteSeriesDrawsNothing) {
  Panel panel;
  panel.series = {line("none", {kNaN, 1}, {1, kInf})};
  const std::string svg = render_svg(one_panel(panel));
  EXPECT_TRUE(series_paths(svg).empty());
  EXPECT_EQ(xml_problem(svg), "");
}

TEST(SvgChart, AxisEndsMapToThePlotAreaEdges) {
  Panel panel{.x = {.min = 0, .max = 10}, .y = {.min = 0, .max = 1}};
  panel.series = {line("s", {0, 10, 5}, {0, 1, 0.5})};
  const std::string svg = render_svg(one_panel(panel));
  const std::string area = first_element(svg, "<rect class=\"plot-area\"");
  const double left = attribute(area, "x"), top = attribute(area, "y");
  const double width = attribute(area, "width"), height = attribute(area, "height");
  const std::vector<std::string> paths = series_paths(svg);
  ASSERT_EQ(paths.size(), 1u);
  const std::vector<double> xy = path_numbers(paths[0]);
  ASSERT_EQ(xy.size(), 6u) << paths[0];
  EXPECT_NEAR(xy[0], left, 0.02);  // (x min, y min): bottom left
  EXPECT_NEAR(xy[1], top + height, 0.02);
  EXPECT_NEAR(xy[2], left + width, 0.02);  // (x max, y max): top right
  EXPECT_NEAR(xy[3], top, 0.02);
  EXPECT_NEAR(xy[4], left + width / 2, 0.02);
  EXPECT_NEAR(xy[5], top + height / 2, 0.02);
}

TEST(SvgChart, MarkersOutsideFixedRangesAreLeftOut) {
  Panel panel{.y = {.min = 0, .max = 1}, .legend = LegendPos::kNone};
  panel.series = {line("s", {1, 2, 3}, {0.5, 2.0, 1.0})};
  panel.series[0].markers = true;
  const std::string svg = render_svg(one_panel(panel));
  EXPECT_EQ(count(svg, "<circle"), 2u);  // y = 2 is above the fixed max; y = 1 sits on it
  EXPECT_EQ(series_paths(svg).size(), 1u);  // the line itself is kept and clipped
  EXPECT_NE(svg.find("clip-path=\"url(#panel0-area)\""), std::string::npos);
}

TEST(SvgChart, FreeAxisEndsSnapToNiceTicks) {
  Panel panel;
  panel.series = {line("s", {3, 97}, {0.05, 0.87})};
  const std::string svg = render_svg(one_panel(panel));
  for (const char* label : {">0</text>", ">20</text>", ">100</text>", ">0.0</text>", ">0.4</text>", ">1.0</text>"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  EXPECT_EQ(svg.find(">120</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">1.2</text>"), std::string::npos);
}

TEST(SvgChart, PaletteColorsFollowBarsThenSeries) {
  Panel panel;
  panel.bars = {Bars{.x = {1}, .height = {1}}};
  panel.series = {line("a", {1, 2}, {1, 2}), line("b", {1, 2}, {2, 1}), line("c", {1, 2}, {0, 1})};
  panel.series[1].color = "red";
  const std::string svg = render_svg(one_panel(panel));
  EXPECT_NE(first_element(svg, "<rect class=\"bar\"").find("fill=\"" + palette_color(0) + "\""), std::string::npos);
  static const std::regex kStroke("<path class=\"series\" d=\"[^\"]*\" fill=\"none\" stroke=\"([^\"]*)\"");
  std::vector<std::string> strokes;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kStroke); it != std::sregex_iterator(); ++it)
    strokes.push_back((*it)[1]);
  EXPECT_EQ(strokes, (std::vector<std::string>{palette_color(1), "red", palette_color(2)}));
  EXPECT_NE(palette_color(0), palette_color(1));
  EXPECT_EQ(palette_color(8), palette_color(0));
}

TEST(SvgChart, ReliabilityPanelsDrawBarsDiagonalAndLegend) {
  const std::string svg = render_svg(sample_figure());
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 12u);  // 3 panels x 2 bar sets x 2 bins
  EXPECT_EQ(count(svg, "<line class=\"diagonal\""), 3u);
  EXPECT_EQ(count(svg, "fill-opacity=\"0.25\""), 9u);  // 6 count bars and their 3 legend swatches
  EXPECT_EQ(count(svg, "<rect class=\"legend\""), 4u);
  EXPECT_EQ(count(svg, ">accuracy</text>"), 6u);  // y title and legend entry, 3 panels
  EXPECT_EQ(series_paths(svg).size(), 3u);
}

TEST(SvgChart, LegendListsOnlyNamedEntriesAndCanBeOff) {
  Panel panel;
  panel.series = {line("named", {0, 1}, {0, 1}), line("", {0, 1}, {1, 0})};
  const std::string svg = render_svg(one_panel(panel));
  EXPECT_EQ(count(svg, ">named</text>"), 1u);
  EXPECT_EQ(count(svg, "></text>"), 0u);
  EXPECT_EQ(attribute(first_element(svg, "<rect class=\"legend\""), "height"), 28.0);  // one 16 px row + padding
  panel.legend = LegendPos::kNone;
  const std::string no_legend = render_svg(one_panel(panel));
  EXPECT_EQ(no_legend.find("class=\"legend\""), std::string::npos);
  EXPECT_EQ(no_legend.find(">named</text>"), std::string::npos);
}

TEST(SvgChart, OutputIsDeterministic) {
  EXPECT_EQ(render_svg(sample_figure()), render_svg(sample_figure()));
  Figure changed = sample_figure();
  changed.panels[0].series[0].y[1] = 0.81;
  EXPECT_NE(render_svg(changed), render_svg(sample_figure()));
}

TEST(SvgChart, MalformedInputThrows) {
  Panel panel;
  panel.series = {line("lopsided", {1, 2, 3}, {1, 2})};
  test::expect_error([&] { render_svg(one_panel(panel)); }, {"lopsided", "3", "2"});
  Panel bars;
  bars.bars = {Bars{.name = "hist", .x = {1}, .height = {}}};
  test::expect_error([&] { render_svg(one_panel(bars)); }, {"hist"});
  Panel inverted{.y = {.title = "acc", .min = 1, .max = 0}};
  test::expect_error([&] { render_svg(one_panel(inverted)); }, {"acc", "min"});
  Figure no_cols{.cols = 0};
  test::expect_error([&] { render_svg(no_cols); }, {"cols"});
}

TEST(SvgChart, WriteSvgWritesTheRenderedDocument) {
  test::TempDir dir;
  const Figure fig = sample_figure();
  write_svg(dir / "fig.svg", fig);
  EXPECT_EQ(test::read_text(dir / "fig.svg"), render_svg(fig));
}

TEST(SvgChart, WriteToUnwritablePathThrowsNamingIt) {
  test::TempDir dir;
  const std::string path = (dir / "missing-dir" / "fig.svg").string();
  test::expect_error([&] { write_svg(path, sample_figure()); }, {path, "cannot open for writing"});
}

}  // namespace
}  // namespace dspark::plot
