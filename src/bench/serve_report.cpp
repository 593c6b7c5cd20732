#include "bench/serve_report.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "plot/svg_chart.h"

namespace dspark::bench {

namespace fs = std::filesystem;

nlohmann::json to_json(const ServePoint& p) {
  return {{"schedule", p.schedule},         {"concurrency", p.concurrency},       {"requests", p.requests},
          {"output_tokens", p.output_tokens}, {"seconds", p.seconds},             {"aggregate_tps", p.aggregate_tps},
          {"user_tps_mean", p.user_tps_mean}, {"user_tps_p50", p.user_tps_p50},   {"user_tps_p90", p.user_tps_p90},
          {"mean_budget", p.mean_budget},     {"acceptance_length", p.acceptance_length},
          {"draft_share", p.draft_share},     {"runs", p.runs},
          {"cost_model", {{"steps", p.cost_model_steps}, {"measured_over_predicted_p50", p.cost_model_ratio},
                          {"within_10_percent", p.cost_model_within_10},
                          {"measured_over_profile_p50", p.profile_ratio}}}};
}

std::string serve_markdown(const std::vector<ServePoint>& points) {
  std::string s =
      "| schedule | concurrency | aggregate tok/s | tok/s/user mean | p50 | p90 | budget (drafts/request/step) | "
      "acceptance length | drafting share of time | step time measured / predicted (p50; within 10%) | "
      "measured / profile as measured (p50) | runs |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  char row[352], cost[64] = "-", profile[32] = "-";
  for (const auto& p : points) {
    if (p.cost_model_steps > 0) {
      std::snprintf(cost, sizeof cost, "%.2f; %.0f%%", p.cost_model_ratio, 100.0 * p.cost_model_within_10);
      std::snprintf(profile, sizeof profile, "%.2f", p.profile_ratio);
    } else {
      std::snprintf(cost, sizeof cost, "-");
      std::snprintf(profile, sizeof profile, "-");
    }
    std::snprintf(row, sizeof row, "| %s | %ld | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.3f | %s | %s | %ld |\n",
                  p.schedule.c_str(), static_cast<long>(p.concurrency), p.aggregate_tps, p.user_tps_mean,
                  p.user_tps_p50, p.user_tps_p90, p.mean_budget, p.acceptance_length, p.draft_share, cost, profile,
                  static_cast<long>(p.runs));
    s += row;
  }
  return s;
}

void write_serve_plots(const fs::path& dir, const std::vector<ServePoint>& points) {
  fs::create_directories(dir);
  std::map<std::string, std::vector<const ServePoint*>> by_schedule;
  std::vector<std::string> order;
  for (const auto& p : points) {
    if (!by_schedule.count(p.schedule)) order.push_back(p.schedule);
    by_schedule[p.schedule].push_back(&p);
  }
  plot::Panel pareto{.title = "Aggregate throughput against speed per user (one point per concurrency)",
                     .x = {"tokens/s per user (mean)"}, .y = {"aggregate output tokens/s", 0.0}};
  plot::Panel budget{.title = "Verification budget against concurrency", .x = {"log2 concurrency", 0.0},
                     .y = {"drafts verified per request per step", 0.0}};
  for (const std::string& name : order) {
    plot::Series t{.name = name, .markers = true}, b{.name = name, .markers = true};
    for (const ServePoint* p : by_schedule[name]) {
      t.x.push_back(p->user_tps_mean);
      t.y.push_back(p->aggregate_tps);
      b.x.push_back(std::log2(static_cast<double>(p->concurrency)));
      b.y.push_back(p->mean_budget);
    }
    pareto.series.push_back(t);
    budget.series.push_back(b);
  }
  pareto.legend = plot::LegendPos::kTopRight;
  plot::write_svg(dir / "serve_throughput.svg", {.panels = {pareto}, .panel_width = 560});
  plot::write_svg(dir / "serve_budget.svg", {.panels = {budget}, .panel_width = 560});
}

}  // namespace dspark::bench
