#include "bench/http_serve_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>

#include "bench/serve_report.h"
#include "plot/svg_chart.h"

namespace dspark::bench {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr size_t kMaxErrorKinds = 5;

std::string fixed(double v, int decimals = 2) {
  char s[64];
  std::snprintf(s, sizeof s, "%.*f", decimals, v);
  return s;
}

json latency_json(const LatencySummary& l) { return {{"mean", l.mean_ms}, {"median", l.median_ms}, {"p99", l.p99_ms}}; }

json spec_json(const SpecCounters& c) {
  return {{"num_drafts", c.num_drafts},
          {"num_draft_tokens", c.num_draft_tokens},
          {"num_accepted_tokens", c.num_accepted_tokens},
          {"num_accepted_tokens_per_pos", c.accepted_per_pos},
          {"draft_acceptance_rate", c.acceptance_rate()},
          {"mean_acceptance_length", c.mean_acceptance_length()},
          {"acceptance_per_pos", c.acceptance_per_pos()}};
}

json slo_json(const Slo& slo) {
  json j = json::object();
  if (slo.ttft_ms) j["ttft_ms"] = *slo.ttft_ms;
  if (slo.tpot_ms) j["tpot_ms"] = *slo.tpot_ms;
  if (slo.e2el_ms) j["e2el_ms"] = *slo.e2el_ms;
  return j;
}

std::string column_name(const HttpPoint& p) {
  std::string name = p.label + " C=" + (p.load.max_concurrency > 0 ? std::to_string(p.load.max_concurrency) : "inf");
  if (std::isfinite(p.load.request_rate)) name += " rate=" + fixed(p.load.request_rate) + "/s";
  return name;
}

// A table row: its name and its cell for a point.
struct Row {
  std::string name;
  std::function<std::string(const HttpPoint&)> cell;
};

Row count_row(std::string name, int64_t HttpSummary::*field) {
  return {std::move(name), [field](const HttpPoint& p) { return std::to_string(p.summary.*field); }};
}

Row value_row(std::string name, double HttpSummary::*field) {
  return {std::move(name), [field](const HttpPoint& p) { return fixed(p.summary.*field); }};
}

void add_latency_rows(std::vector<Row>& rows, const std::string& what, LatencySummary HttpSummary::*field) {
  using Stat = std::pair<const char*, double LatencySummary::*>;
  for (const auto& [stat, ms] : {Stat{"Mean ", &LatencySummary::mean_ms}, Stat{"Median ", &LatencySummary::median_ms},
                                 Stat{"P99 ", &LatencySummary::p99_ms}}) {
    rows.push_back({stat + what + " (ms)", [field, ms = ms](const HttpPoint& p) {
                      return fixed((p.summary.*field).*ms);
                    }});
  }
}

// Acceptance rows when some point has the server's counters; "-" where a point has none.
void add_spec_rows(std::vector<Row>& rows, const std::vector<HttpPoint>& points) {
  size_t positions = 0;
  bool any = false;
  for (const HttpPoint& p : points)
    if (p.counters.spec) {
      any = true;
      positions = std::max(positions, p.counters.spec->accepted_per_pos.size());
    }
  if (!any) return;
  auto spec_row = [](std::string name, const std::function<double(const SpecCounters&)>& value) {
    return Row{std::move(name), [value](const HttpPoint& p) {
                 return p.counters.spec ? fixed(value(*p.counters.spec)) : std::string("-");
               }};
  };
  rows.push_back(spec_row("Drafts (server counter)", [](const SpecCounters& c) { return c.num_drafts; }));
  rows.push_back(spec_row("Draft acceptance rate", [](const SpecCounters& c) { return c.acceptance_rate(); }));
  rows.push_back(spec_row("Mean acceptance length", [](const SpecCounters& c) { return c.mean_acceptance_length(); }));
  for (size_t k = 0; k < positions; ++k)
    rows.push_back(spec_row("Acceptance at position " + std::to_string(k), [k](const SpecCounters& c) {
      const std::vector<double> rates = c.acceptance_per_pos();
      return k < rates.size() ? rates[k] : 0.0;
    }));
}

// dspark serve's budget and drafting share (the in-process benchmark's columns), when some point has them.
void add_engine_rows(std::vector<Row>& rows, const std::vector<HttpPoint>& points) {
  if (std::none_of(points.begin(), points.end(), [](const HttpPoint& p) { return p.counters.engine.has_value(); }))
    return;
  rows.push_back({"Verification budget (drafts/request/step)", [](const HttpPoint& p) {
                    return p.counters.engine ? fixed(as_serve_point(p).mean_budget) : std::string("-");
                  }});
  rows.push_back({"Drafting share of time", [](const HttpPoint& p) {
                    return p.counters.engine ? fixed(as_serve_point(p).draft_share, 3) : std::string("-");
                  }});
}

std::vector<Row> table_rows(const std::vector<HttpPoint>& points) {
  std::vector<Row> rows = {
      count_row("Successful requests", &HttpSummary::completed),
      count_row("Failed requests", &HttpSummary::failed),
      value_row("Benchmark duration (s)", &HttpSummary::seconds),
      count_row("Total input tokens", &HttpSummary::input_tokens),
      count_row("Total generated tokens", &HttpSummary::output_tokens),
      value_row("Request throughput (req/s)", &HttpSummary::request_throughput),
      value_row("Output token throughput, aggregate (tok/s)", &HttpSummary::output_throughput),
      value_row("Total token throughput (tok/s)", &HttpSummary::total_token_throughput),
  };
  if (std::any_of(points.begin(), points.end(), [](const HttpPoint& p) { return !p.slo.empty(); }))
    rows.push_back(value_row("Request goodput (req/s)", &HttpSummary::request_goodput));
  rows.push_back(value_row("Tok/s per user, mean", &HttpSummary::user_tps_mean));
  rows.push_back(value_row("Tok/s per user, p50", &HttpSummary::user_tps_p50));
  rows.push_back(value_row("Tok/s per user, p90", &HttpSummary::user_tps_p90));
  add_latency_rows(rows, "TTFT", &HttpSummary::ttft);
  add_latency_rows(rows, "TPOT", &HttpSummary::tpot);
  add_latency_rows(rows, "ITL", &HttpSummary::itl);
  add_latency_rows(rows, "E2EL", &HttpSummary::e2el);
  add_engine_rows(rows, points);
  add_spec_rows(rows, points);
  return rows;
}

std::string failure_lines(const std::vector<HttpPoint>& points) {
  std::string s;
  for (const HttpPoint& p : points)
    for (const auto& [reason, count] : p.errors)
      s += "- " + column_name(p) + ": " + std::to_string(count) + " x " + reason + "\n";
  return s.empty() ? s : "\nFailed requests:\n" + s;
}

// TTFT and TPOT, median and p99, against log2 concurrency, a series per label and statistic.
plot::Panel latency_panel(const std::string& what, LatencySummary HttpSummary::*field,
                          const std::vector<HttpPoint>& points) {
  plot::Panel panel{.title = what + " against concurrency", .x = {"log2 concurrency"}, .y = {what + " (ms)", 0.0}};
  std::vector<std::string> labels;
  for (const HttpPoint& p : points)
    if (std::find(labels.begin(), labels.end(), p.label) == labels.end()) labels.push_back(p.label);
  for (const std::string& label : labels)
    for (const bool p99 : {false, true}) {
      plot::Series s{.name = label + (p99 ? " p99" : " median"), .markers = true, .dashed = p99};
      for (const HttpPoint& p : points) {
        if (p.label != label || p.load.max_concurrency < 1) continue;
        s.x.push_back(std::log2(static_cast<double>(p.load.max_concurrency)));
        s.y.push_back(p99 ? (p.summary.*field).p99_ms : (p.summary.*field).median_ms);
      }
      panel.series.push_back(std::move(s));
    }
  panel.legend = plot::LegendPos::kTopLeft;
  return panel;
}

}  // namespace

HttpPoint make_http_point(const std::string& label, const HttpEndpoint& endpoint, const HttpRequestOptions& options,
                          const HttpLoad& load, const Slo& slo, const HttpRun& run) {
  HttpPoint p{.label = label, .url = endpoint.url, .model = options.model, .endpoint = options.endpoint,
              .load = load, .slo = slo, .summary = summarize(run.records, run.seconds, slo), .counters = run.counters};
  std::map<std::string, int64_t> counts;
  for (const RequestRecord& r : run.records)
    if (!r.success) ++counts[r.error];
  p.errors.assign(counts.begin(), counts.end());
  std::stable_sort(p.errors.begin(), p.errors.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (p.errors.size() > kMaxErrorKinds) p.errors.resize(kMaxErrorKinds);
  return p;
}

ServePoint as_serve_point(const HttpPoint& p) {
  ServePoint s;
  s.schedule = p.label;
  s.concurrency = p.load.max_concurrency;  // 0: uncapped (the JSON's concurrency null)
  s.requests = p.summary.requests;
  s.output_tokens = p.summary.output_tokens;
  s.seconds = p.summary.seconds;
  s.aggregate_tps = p.summary.output_throughput;
  s.user_tps_mean = p.summary.user_tps_mean;
  s.user_tps_p50 = p.summary.user_tps_p50;
  s.user_tps_p90 = p.summary.user_tps_p90;
  const std::optional<EngineCounters>& engine = p.counters.engine;
  s.mean_budget = engine ? engine->mean_budget() : kNaN;
  s.draft_share = engine && p.summary.seconds > 0 ? engine->draft_seconds / p.summary.seconds : kNaN;
  s.acceptance_length = kNaN;  // committed tokens per request-step: no server counts them
  return s;
}

json to_json(const HttpPoint& p) {
  const HttpSummary& s = p.summary;
  json j = to_json(as_serve_point(p));
  for (const char* key : {"mean_budget", "acceptance_length", "draft_share"})
    if (!std::isfinite(j[key].get<double>())) j[key] = nullptr;  // unknown, not a measured zero
  if (p.load.max_concurrency < 1) j["concurrency"] = nullptr;  // no cap, as max_concurrency
  j.update({{"url", p.url}, {"model", p.model}, {"endpoint", p.endpoint},
            {"max_concurrency", p.load.max_concurrency > 0 ? json(p.load.max_concurrency) : json()},
            {"request_rate", std::isfinite(p.load.request_rate) ? json(p.load.request_rate) : json()},
            {"completed", s.completed}, {"failed", s.failed}, {"input_tokens", s.input_tokens},
            {"request_throughput", s.request_throughput}, {"output_throughput", s.output_throughput},
            {"total_token_throughput", s.total_token_throughput}, {"goodput_slo", slo_json(p.slo)},
            {"good_requests", s.good_requests}, {"request_goodput", s.request_goodput},
            {"ttft_ms", latency_json(s.ttft)}, {"tpot_ms", latency_json(s.tpot)}, {"itl_ms", latency_json(s.itl)},
            {"e2el_ms", latency_json(s.e2el)},
            {"spec_decode", p.counters.spec ? spec_json(*p.counters.spec) : json()}});
  json errors = json::array();
  for (const auto& [reason, count] : p.errors) errors.push_back({{"reason", reason}, {"count", count}});
  j["errors"] = errors;
  return j;
}

// Built with append: GCC 12 warns (-Wstringop-overflow, a false positive) on `" " + string`.
std::string http_markdown(const std::vector<HttpPoint>& points) {
  std::string s = "| metric |", rule = "|---|";
  for (const HttpPoint& p : points) {
    s.append(" ").append(column_name(p)).append(" |");
    rule.append("---|");
  }
  s.append("\n").append(rule).append("\n");
  for (const Row& row : table_rows(points)) {
    s.append("| ").append(row.name).append(" |");
    for (const HttpPoint& p : points) s.append(" ").append(row.cell(p)).append(" |");
    s.append("\n");
  }
  return s.append(failure_lines(points));
}

void write_http_plots(const fs::path& dir, const std::vector<HttpPoint>& points) {
  std::vector<ServePoint> serve_points;
  for (const HttpPoint& p : points) serve_points.push_back(as_serve_point(p));
  write_serve_plots(dir, serve_points);
  // Without a budget (servers other than ours) that chart would be an empty frame.
  if (std::none_of(serve_points.begin(), serve_points.end(),
                   [](const ServePoint& p) { return std::isfinite(p.mean_budget); }))
    fs::remove(dir / "serve_budget.svg");
  plot::write_svg(dir / "serve_latency.svg",
                  {.panels = {latency_panel("TTFT", &HttpSummary::ttft, points),
                              latency_panel("TPOT", &HttpSummary::tpot, points)},
                   .cols = 2, .panel_width = 480});
}

}  // namespace dspark::bench
