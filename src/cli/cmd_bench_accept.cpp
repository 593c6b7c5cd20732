// dspark bench accept: acceptance of one or more drafters on prompt files (DeepSpec's protocol),
// as one table (Markdown, or JSON with --json) and, with --plot-dir, the conditional acceptance per
// position (the paper's Figure 2) and a confidence-threshold sweep (Figure 5) as SVG files.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/accept_bench.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/progress.h"
#include "draft/load_drafter.h"
#include "plot/svg_chart.h"

namespace dspark::cli {
namespace {

namespace fs = std::filesystem;

struct BenchAcceptArgs {
  std::string target_dir, drafts, prompts, prompt_format = "auto", plot_dir, thresholds, dtype = "bf16", json_out;
  int64_t limit = 0;
  bool json = false;
  bench::AcceptOptions options;
};

// "turns" unless the file's first line has an "instruction" and no "turns".
std::string detect_format(const std::string& file, const std::string& flag) {
  if (flag != "auto") return flag;
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line.find("\"turns\"") == std::string::npos && line.find("\"instruction\"") != std::string::npos ? "instruction"
                                                                                                           : "turns";
}

// One drafter on one prompt file.
struct Cell {
  std::string drafter, file;
  double threshold = 0;
  engine::SpeculativeStats stats;
};

nlohmann::json cell_json(const Cell& c) {
  return {{"drafter", c.drafter},
          {"prompts", c.file},
          {"confidence_threshold", c.threshold},
          {"rounds", c.stats.rounds},
          {"acceptance_length", c.stats.acceptance_length()},
          {"draft_tokens_per_proposal", c.stats.drafts_per_round()},
          {"accept_rate", c.stats.accept_rate()},
          {"conditional_accept_rate", c.stats.conditional_accept_rate()}};
}

std::string drafter_label(const std::string& dir, const draft::Drafter& d) {
  return fs::path(dir).filename().string() == "model" ? fs::path(dir).parent_path().filename().string() + "/" + d.method()
                                                       : fs::path(dir).filename().string();
}

// Mean over prompt files of a per-file quantity (the macro average).
template <class F>
double macro(const std::vector<Cell>& cells, const std::string& drafter, double threshold, F value) {
  double sum = 0;
  int n = 0;
  for (const Cell& c : cells)
    if (c.drafter == drafter && c.threshold == threshold) sum += value(c), ++n;
  return n ? sum / n : 0.0;
}

void print_markdown(const std::vector<Cell>& cells, const std::vector<std::string>& drafters,
                    const std::vector<std::string>& files, const BenchAcceptArgs& a) {
  std::printf("Acceptance length tau (bonus included), T = %.2f, gamma = %lld, max %lld tokens%s\n\n",
              a.options.temperature, static_cast<long long>(a.options.gamma),
              static_cast<long long>(a.options.max_tokens),
              a.limit > 0 ? (", first " + std::to_string(a.limit) + " prompts per file").c_str() : "");
  std::printf("| drafter |");
  for (const std::string& f : files) std::printf(" %s |", fs::path(f).stem().c_str());
  std::printf(" macro tau | drafts/proposal |\n|---|");
  for (size_t i = 0; i < files.size() + 2; ++i) std::printf("---|");
  std::printf("\n");
  for (const std::string& d : drafters) {
    std::printf("| %s |", d.c_str());
    for (const std::string& f : files)
      for (const Cell& c : cells)
        if (c.drafter == d && c.file == f && c.threshold == 0) std::printf(" %.3f |", c.stats.acceptance_length());
    std::printf(" %.3f | %.2f |\n", macro(cells, d, 0, [](const Cell& c) { return c.stats.acceptance_length(); }),
                macro(cells, d, 0, [](const Cell& c) { return c.stats.drafts_per_round(); }));
  }
  std::printf("\nConditional acceptance per position (macro over files)\n\n| drafter |");
  for (int64_t k = 0; k < a.options.gamma; ++k) std::printf(" %lld |", static_cast<long long>(k + 1));
  std::printf("\n|---|");
  for (int64_t k = 0; k < a.options.gamma; ++k) std::printf("---|");
  std::printf("\n");
  for (const std::string& d : drafters) {
    std::printf("| %s |", d.c_str());
    for (int64_t k = 0; k < a.options.gamma; ++k)
      std::printf(" %.3f |", macro(cells, d, 0, [k](const Cell& c) {
        const auto v = c.stats.conditional_accept_rate();
        return k < static_cast<int64_t>(v.size()) ? v[k] : 0.0;
      }));
    std::printf("\n");
  }
}

void write_plots(const std::vector<Cell>& cells, const std::vector<std::string>& drafters,
                 const std::vector<double>& thresholds, const BenchAcceptArgs& a) {
  fs::create_directories(a.plot_dir);
  plot::Panel per_position{.title = "Conditional acceptance per position (macro over prompt files)",
                           .x = {"draft position"}, .y = {"P(accepted | earlier accepted)", 0.0, 1.0}};
  for (const std::string& d : drafters) {
    plot::Series s{.name = d, .markers = true};
    for (int64_t k = 0; k < a.options.gamma; ++k) {
      s.x.push_back(static_cast<double>(k + 1));
      s.y.push_back(macro(cells, d, 0, [k](const Cell& c) {
        const auto v = c.stats.conditional_accept_rate();
        return k < static_cast<int64_t>(v.size()) ? v[k] : 0.0;
      }));
    }
    per_position.series.push_back(s);
  }
  per_position.legend = plot::LegendPos::kBottomLeft;
  plot::write_svg(fs::path(a.plot_dir) / "accept_per_position.svg", {.panels = {per_position}, .panel_width = 560});
  if (thresholds.size() < 2) return;
  plot::Panel tau{.title = "Acceptance length against the confidence threshold", .x = {"threshold", 0.0, 1.0},
                  .y = {"tau (macro)"}};
  plot::Panel drafts{.title = "Drafts per proposal against the confidence threshold", .x = {"threshold", 0.0, 1.0},
                     .y = {"drafts per proposal", 0.0}};
  for (const std::string& d : drafters) {
    plot::Series t{.name = d, .markers = true}, g{.name = d, .markers = true};
    for (double th : thresholds) {
      bool present = false;
      for (const Cell& c : cells) present |= c.drafter == d && c.threshold == th;
      if (!present) continue;
      t.x.push_back(th), g.x.push_back(th);
      t.y.push_back(macro(cells, d, th, [](const Cell& c) { return c.stats.acceptance_length(); }));
      g.y.push_back(macro(cells, d, th, [](const Cell& c) { return c.stats.drafts_per_round(); }));
    }
    if (t.x.size() > 1) tau.series.push_back(t), drafts.series.push_back(g);
  }
  plot::write_svg(fs::path(a.plot_dir) / "threshold_sweep.svg", {.panels = {tau, drafts}, .cols = 2});
}

void run(BenchAcceptArgs a) {
  const std::string dir = a.target_dir.empty() ? default_model_dir() : a.target_dir;
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(dir);
  if (!tok) throw Error(dir + ": no tokenizer.json (prompts are rendered with the chat template)");
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype)});
  const std::vector<std::string> draft_dirs = split_csv(a.drafts), files = split_csv(a.prompts);
  if (draft_dirs.empty() || files.empty()) throw Error("bench accept: give --draft and --prompts");
  std::vector<double> thresholds = {0.0};
  for (const std::string& t : split_csv(a.thresholds)) {
    const double v = std::stod(t);
    if (v < 0 || v >= 1) throw Error("--thresholds: each value must be in [0, 1)");
    if (v > 0) thresholds.push_back(v);
  }
  std::vector<std::vector<std::string>> prompts;
  int64_t total_runs = 0;
  for (const std::string& f : files) prompts.push_back(bench::read_prompts(f, detect_format(f, a.prompt_format), a.limit));

  std::vector<Cell> cells;
  std::vector<std::string> labels;
  std::vector<std::unique_ptr<draft::Drafter>> drafters;
  for (const std::string& d : draft_dirs) {
    drafters.push_back(draft::load_drafter("", d, target, {.max_slots = 1, .capacity = 8192}));
    labels.push_back(drafter_label(d, *drafters.back()));
    const bool sweeps = drafters.back()->method() == "dspark";
    for (const auto& p : prompts) total_runs += static_cast<int64_t>(p.size() * (sweeps ? thresholds.size() : 1));
  }
  Progress progress("bench accept", total_runs, "prompt");
  int64_t done = 0;
  for (size_t i = 0; i < drafters.size(); ++i) {
    const bool sweeps = drafters[i]->method() == "dspark";
    for (double th : sweeps ? thresholds : std::vector<double>{0.0}) {
      for (size_t f = 0; f < files.size(); ++f) {
        bench::AcceptOptions o = a.options;
        o.confidence_threshold = th;
        const int64_t before = done;
        Cell cell{labels[i], files[f], th,
                  bench::run_accept(target, *drafters[i], *tok, dir, prompts[f], o,
                                    [&](int64_t n) { progress.update(done = before + n, labels[i]); })};
        cells.push_back(std::move(cell));
      }
    }
  }
  progress.finish();
  if (!a.plot_dir.empty()) write_plots(cells, labels, thresholds, a);
  nlohmann::json out = {{"target", dir},
                        {"temperature", a.options.temperature},
                        {"gamma", a.options.gamma},
                        {"max_tokens", a.options.max_tokens},
                        {"limit", a.limit},
                        {"results", nlohmann::json::array()},
                        {"macro_acceptance_length", nlohmann::json::object()}};
  for (const Cell& c : cells) out["results"].push_back(cell_json(c));
  for (const std::string& d : labels)
    out["macro_acceptance_length"][d] = macro(cells, d, 0, [](const Cell& c) { return c.stats.acceptance_length(); });
  if (!a.json_out.empty()) {
    std::ofstream file(a.json_out);
    if (!(file << out.dump(2) << "\n")) throw Error(a.json_out + ": cannot write");
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  print_markdown(cells, labels, files, a);
}

}  // namespace

void register_bench_accept(CLI::App& bench) {
  auto a = std::make_shared<BenchAcceptArgs>();
  CLI::App* cmd = bench.add_subcommand("accept", "acceptance of drafters on prompt files (DeepSpec's protocol)");
  cmd->add_option("--target", a->target_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--draft", a->drafts, "comma-separated drafter directories")->required();
  cmd->add_option("--prompts", a->prompts, "comma-separated prompt files ({\"turns\": [...]} JSONL)")->required();
  cmd->add_option("--prompt-format", a->prompt_format, "auto | turns | instruction (Self-Instruct's user-oriented file)")
      ->capture_default_str();
  cmd->add_option("--temperature", a->options.temperature, "sampling temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--gamma", a->options.gamma, "drafts per round")->capture_default_str();
  cmd->add_option("--max-tokens", a->options.max_tokens, "new tokens per prompt")->capture_default_str();
  cmd->add_option("--limit", a->limit, "first N prompts of each file (0: all)");
  cmd->add_option("--seed", a->options.seed, "prompt i samples with seed + i")->capture_default_str();
  cmd->add_option("--thresholds", a->thresholds, "confidence thresholds to sweep for DSpark drafters, e.g. 0.1,0.2,...,0.9");
  cmd->add_option("--plot-dir", a->plot_dir, "write accept_per_position.svg (and threshold_sweep.svg) here");
  cmd->add_option("--dtype", a->dtype, "target weights in memory: bf16 (default) or f32");
  cmd->add_flag("--json", a->json, "machine-readable output");
  cmd->add_option("--json-out", a->json_out, "also write the JSON results to this file (with the Markdown on stdout)");
  cmd->callback([a] { run(*a); });
}

}  // namespace dspark::cli
