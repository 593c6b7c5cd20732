#include "bench/accept_report.h"

#include <algorithm>
#include <cstdio>

#include "bench/printf_string.h"
#include "plot/svg_chart.h"

namespace dspark::bench {

namespace fs = std::filesystem;

namespace {

double tau(const AcceptCell& c) { return c.stats.acceptance_length(); }
double drafts_per_step(const AcceptCell& c) { return c.stats.drafts_per_step(); }

// DeepSpec's confidence metrics of the cells that have them, one row per (drafter, file) and a
// macro row per drafter; empty when no cell has a confidence head.
std::string confidence_markdown(const AcceptReport& r) {
  std::string rows;
  for (const std::string& d : r.drafters) {
    ConfidenceMetrics sum;
    int n = 0;
    for (const std::string& f : r.files)
      for (const AcceptCell& c : r.cells)
        if (c.drafter == d && c.file == f && c.threshold == 0 && c.confidence) {
          const ConfidenceMetrics& m = *c.confidence;
          rows += printf_string("| %s | %s | %lld | %.4f | %.4f | %.3f | %.3f |\n", d.c_str(),
                                fs::path(f).stem().c_str(), static_cast<long long>(m.rounds), m.ece, m.ece_floor, m.auc,
                                m.auc_exact);
          sum.rounds += m.rounds, sum.ece += m.ece, sum.ece_floor += m.ece_floor, sum.auc += m.auc,
              sum.auc_exact += m.auc_exact, ++n;
        }
    if (n > 1)
      rows += printf_string("| %s | **macro** | %lld | %.4f | %.4f | %.3f | %.3f |\n", d.c_str(),
                            static_cast<long long>(sum.rounds), sum.ece / n, sum.ece_floor / n, sum.auc / n,
                            sum.auc_exact / n);
  }
  if (rows.empty()) return rows;
  return "\nConfidence head (DeepSpec's evaluation: cumulative survival as the drafter reports it, its STS applied, "
         "against the realised prefix acceptance; per file, weighted over positions by rounds. ECE floor: what a "
         "perfectly calibrated head would read on these rounds, labels redrawn from its own predictions; a binned ECE "
         "is never zero at a finite sample)\n\n"
         "| drafter | prompts | rounds | ECE | ECE floor | ROC-AUC | ROC-AUC, exact probabilities |\n"
         "|---|---|---|---|---|---|---|\n" +
         rows;
}

}  // namespace

bool AcceptReport::has_cells(const std::string& drafter, double threshold) const {
  return std::any_of(cells.begin(), cells.end(),
                     [&](const AcceptCell& c) { return c.drafter == drafter && c.threshold == threshold; });
}

double AcceptReport::macro(const std::string& drafter, double threshold, double (*value)(const AcceptCell&)) const {
  double sum = 0;
  int n = 0;
  for (const AcceptCell& c : cells)
    if (c.drafter == drafter && c.threshold == threshold) sum += value(c), ++n;
  return n ? sum / n : 0.0;
}

double AcceptReport::macro_conditional(const std::string& drafter, int64_t k) const {
  double sum = 0;
  int n = 0;
  for (const AcceptCell& c : cells)
    if (c.drafter == drafter && c.threshold == 0) {
      const std::vector<double> v = c.stats.conditional_accept_rate();
      sum += k < static_cast<int64_t>(v.size()) ? v[k] : 0.0;
      ++n;
    }
  return n ? sum / n : 0.0;
}

std::string AcceptReport::markdown() const {
  std::string s = printf_string("Acceptance length tau (bonus included), T = %.2f, gamma = %lld, max %lld tokens", options.temperature,
                         static_cast<long long>(options.gamma), static_cast<long long>(options.max_tokens));
  if (limit > 0) s += printf_string(", first %lld prompts per file", static_cast<long long>(limit));
  s += "\n\n| drafter |";
  for (const std::string& f : files) s += printf_string(" %s |", fs::path(f).stem().c_str());
  s += " macro tau | drafts/proposal |\n|---|";
  for (size_t i = 0; i < files.size() + 2; ++i) s += "---|";
  s += "\n";
  for (const std::string& d : drafters) {
    s += printf_string("| %s |", d.c_str());
    for (const std::string& f : files)
      for (const AcceptCell& c : cells)
        if (c.drafter == d && c.file == f && c.threshold == 0) s += printf_string(" %.3f |", tau(c));
    s += printf_string(" %.3f | %.2f |\n", macro(d, 0, tau), macro(d, 0, drafts_per_step));
  }
  s += "\nConditional acceptance per position (macro over files)\n\n| drafter |";
  for (int64_t k = 0; k < options.gamma; ++k) s += printf_string(" %lld |", static_cast<long long>(k + 1));
  s += "\n|---|";
  for (int64_t k = 0; k < options.gamma; ++k) s += "---|";
  s += "\n";
  for (const std::string& d : drafters) {
    s += printf_string("| %s |", d.c_str());
    for (int64_t k = 0; k < options.gamma; ++k) s += printf_string(" %.3f |", macro_conditional(d, k));
    s += "\n";
  }
  return s + sweep_markdown() + confidence_markdown(*this);
}

std::string AcceptReport::sweep_markdown() const {
  if (thresholds.size() < 2) return "";
  std::string s = "\nConfidence-threshold sweep (a DSpark block cut before its first slot below the threshold; macro over "
                  "files)\n\n| drafter | threshold | macro tau | drafts/proposal |\n|---|---|---|---|\n";
  for (const std::string& d : drafters)
    for (double th : thresholds) {
      if (has_cells(d, th)) s += printf_string("| %s | %.2f | %.3f | %.2f |\n", d.c_str(), th, macro(d, th, tau), macro(d, th, drafts_per_step));
    }
  return s;
}

namespace {

// gamma entries, one per draft position: null where no block reached it (a threshold cut every
// block before it), so every result indexes positions alike.
nlohmann::json per_position(const std::vector<double>& rates, int64_t gamma) {
  nlohmann::json out = nlohmann::json::array();
  for (int64_t k = 0; k < gamma; ++k)
    out.push_back(k < static_cast<int64_t>(rates.size()) ? nlohmann::json(rates[static_cast<size_t>(k)]) : nlohmann::json());
  return out;
}

}  // namespace

nlohmann::json AcceptReport::to_json(const std::string& target_dir) const {
  nlohmann::json out = {{"target", target_dir},       {"temperature", options.temperature},
                        {"gamma", options.gamma},     {"max_tokens", options.max_tokens},
                        {"limit", limit},             {"results", nlohmann::json::array()},
                        {"macro_acceptance_length", nlohmann::json::object()}};
  for (const AcceptCell& c : cells) {
    out["results"].push_back({{"drafter", c.drafter},
                              {"prompts", c.file},
                              {"confidence_threshold", c.threshold},
                              {"num_steps", c.stats.num_steps},
                              {"num_draft_tokens", c.stats.num_draft_tokens},
                              {"num_accepted_tokens", c.stats.num_accepted_tokens},
                              {"acceptance_length", tau(c)},
                              {"draft_tokens_per_proposal", drafts_per_step(c)},
                              {"accept_rate", per_position(c.stats.accept_rate_per_pos(), options.gamma)},
                              {"conditional_accept_rate", per_position(c.stats.conditional_accept_rate(), options.gamma)}});
    if (c.confidence)
      out["results"].back()["confidence"] = {{"rounds", c.confidence->rounds},
                                             {"ece_mean", c.confidence->ece},
                                             {"ece_floor_mean", c.confidence->ece_floor},
                                             {"auc_mean", c.confidence->auc},
                                             {"auc_exact_mean", c.confidence->auc_exact}};
  }
  for (const std::string& d : drafters) out["macro_acceptance_length"][d] = macro(d, 0, tau);
  return out;
}

void AcceptReport::write_plots(const fs::path& dir) const {
  fs::create_directories(dir);
  plot::Panel per_position{.title = "Conditional acceptance per position (macro over prompt files)",
                           .x = {"draft position"}, .y = {"P(accepted | earlier accepted)", 0.0, 1.0}};
  for (const std::string& d : drafters) {
    plot::Series s{.name = d, .markers = true};
    for (int64_t k = 0; k < options.gamma; ++k) {
      s.x.push_back(static_cast<double>(k + 1));
      s.y.push_back(macro_conditional(d, k));
    }
    per_position.series.push_back(s);
  }
  per_position.legend = plot::LegendPos::kBottomLeft;
  plot::write_svg(dir / "accept_per_position.svg", {.panels = {per_position}, .panel_width = 560});
  if (thresholds.size() < 2) return;
  plot::Panel tau_panel{.title = "Acceptance length against the confidence threshold", .x = {"threshold", 0.0, 1.0},
                        .y = {"tau (macro)"}};
  plot::Panel drafts_panel{.title = "Drafts per proposal against the confidence threshold", .x = {"threshold", 0.0, 1.0},
                           .y = {"drafts per proposal", 0.0}};
  for (const std::string& d : drafters) {
    plot::Series t{.name = d, .markers = true}, g{.name = d, .markers = true};
    for (double th : thresholds) {
      if (!has_cells(d, th)) continue;
      t.x.push_back(th), g.x.push_back(th);
      t.y.push_back(macro(d, th, tau));
      g.y.push_back(macro(d, th, drafts_per_step));
    }
    if (t.x.size() > 1) tau_panel.series.push_back(t), drafts_panel.series.push_back(g);
  }
  plot::write_svg(dir / "threshold_sweep.svg", {.panels = {tau_panel, drafts_panel}, .cols = 2});
}

}  // namespace dspark::bench
