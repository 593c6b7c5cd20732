// dspark bench serve: closed-loop clients over the batched engine for each schedule and
// concurrency (bench/serve_bench.h); a Markdown or JSON table and, with --plot-dir, aggregate
// throughput against tokens/s per user (the paper's Figure 7) and the verification budget against
// concurrency (Figure 8) as SVG files.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "bench/accept_bench.h"
#include "bench/serve_bench.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "draft/load_drafter.h"
#include "model/config.h"
#include "plot/svg_chart.h"
#include "tokenizer/chat_template.h"

namespace dspark::cli {
namespace {

namespace fs = std::filesystem;

struct BenchServeArgs {
  std::string target_dir, draft_dir, method, prompts, prompt_format = "turns", schedules = "none,mtp1,dspark-async";
  std::string concurrency = "1,2,4,8,16,32,64", dtype = "bf16", sps_file, plot_dir, json_out;
  int64_t limit = 64;
  int64_t repeats = 3;
  bool json = false;
  bench::ServeOptions options;
};

nlohmann::json point_json(const bench::ServePoint& p) {
  return {{"schedule", p.schedule},         {"concurrency", p.concurrency},       {"requests", p.requests},
          {"output_tokens", p.output_tokens}, {"seconds", p.seconds},             {"aggregate_tps", p.aggregate_tps},
          {"user_tps_mean", p.user_tps_mean}, {"user_tps_p50", p.user_tps_p50},   {"user_tps_p90", p.user_tps_p90},
          {"mean_budget", p.mean_budget},     {"acceptance_length", p.acceptance_length},
          {"draft_share", p.draft_share},     {"runs", p.runs}};
}

std::string markdown(const std::vector<bench::ServePoint>& points) {
  std::string s =
      "| schedule | concurrency | aggregate tok/s | tok/s/user mean | p50 | p90 | budget (drafts/request/step) | "
      "acceptance length | drafting share of time | runs |\n|---|---|---|---|---|---|---|---|---|---|\n";
  char row[256];
  for (const auto& p : points) {
    std::snprintf(row, sizeof row, "| %s | %ld | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.3f | %ld |\n", p.schedule.c_str(),
                  static_cast<long>(p.concurrency), p.aggregate_tps, p.user_tps_mean, p.user_tps_p50, p.user_tps_p90,
                  p.mean_budget, p.acceptance_length, p.draft_share, static_cast<long>(p.runs));
    s += row;
  }
  return s;
}

void write_plots(const fs::path& dir, const std::vector<bench::ServePoint>& points) {
  fs::create_directories(dir);
  std::map<std::string, std::vector<const bench::ServePoint*>> by_schedule;
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
    for (const bench::ServePoint* p : by_schedule[name]) {
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

void run_bench_serve(const BenchServeArgs& a) {
  torch::NoGradGuard no_grad;
  if (a.prompts.empty()) throw Error("bench serve: --prompts is required");
  const std::string dir = a.target_dir.empty() ? default_model_dir() : a.target_dir;
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype)});
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(fs::path(dir));
  const tokenizer::ChatTemplate chat = tokenizer::ChatTemplate::load(fs::path(dir));
  std::vector<std::vector<int64_t>> prompts;
  for (const std::string& text : bench::read_prompts(a.prompts, a.prompt_format, a.limit)) {
    const std::vector<int32_t> ids = tok.encode(chat.render({{"user", text}}, {.add_generation_prompt = true, .enable_thinking = false}));
    prompts.emplace_back(ids.begin(), ids.end());
  }
  std::vector<schedule::ScheduleKind> kinds;
  for (const std::string& s : split_csv(a.schedules)) kinds.push_back(schedule::parse_schedule_kind(s));
  const std::vector<int64_t> levels = parse_ids(a.concurrency, "--concurrency");
  const int64_t max_c = *std::max_element(levels.begin(), levels.end());
  if (*std::min_element(levels.begin(), levels.end()) < 1) throw Error("bench serve: --concurrency values must be >= 1");

  bench::ServeOptions o = a.options;
  o.stop_ids = model::GenerationConfig::load_or_default(dir, target.config()).eos_token_ids;
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  std::unique_ptr<draft::Drafter> drafter;
  if (!a.draft_dir.empty() || !a.method.empty()) {
    drafter = draft::load_drafter(a.method, a.draft_dir, target,
                                  {.max_slots = max_c, .capacity = drafter_capacity(longest + o.max_tokens),
                                   .weight_dtype = parse_weight_dtype(a.dtype)});
    o.gamma = resolve_gamma(o.gamma, *drafter);
  }
  const engine::StepCost cost =
      load_or_profile_step_cost(a.sps_file, target, drafter.get(), dir, a.draft_dir, a.dtype, max_c, o.gamma);

  // Warm-up (allocator, kernels), not measured.
  bench::run_serve_point(target, drafter.get(), cost, kinds[0], 1, {prompts[0]}, {.min_requests = 1, .max_tokens = 8});
  // Schedules alternate at each concurrency, repeat after repeat, so a drift of the machine's speed
  // hits them alike; each point reports the median of its repeats.
  if (a.repeats < 1) throw Error("bench serve: --repeats must be >= 1");
  std::vector<bench::ServePoint> points;
  for (int64_t c : levels) {
    std::vector<std::vector<bench::ServePoint>> runs(kinds.size());
    for (int64_t rep = 0; rep < a.repeats; ++rep)
      for (size_t k = 0; k < kinds.size(); ++k) {
        runs[k].push_back(bench::run_serve_point(target, drafter.get(), cost, kinds[k], c, prompts, o));
        const bench::ServePoint& p = runs[k].back();
        std::fprintf(stderr, "%s C=%ld run %ld: %.1f tok/s aggregate, %.1f tok/s/user, budget %.2f, acceptance %.2f\n",
                     p.schedule.c_str(), static_cast<long>(c), static_cast<long>(rep + 1), p.aggregate_tps,
                     p.user_tps_mean, p.mean_budget, p.acceptance_length);
      }
    for (const auto& r : runs) points.push_back(bench::median_point(r));
  }
  std::stable_sort(points.begin(), points.end(), [&](const auto& x, const auto& y) {
    auto rank = [&](const std::string& name) {
      for (size_t i = 0; i < kinds.size(); ++i)
        if (schedule::schedule_kind_name(kinds[i]) == name) return i;
      return kinds.size();
    };
    return rank(x.schedule) < rank(y.schedule);
  });
  nlohmann::json json = nlohmann::json::array();
  for (const auto& p : points) json.push_back(point_json(p));
  std::cout << (a.json ? json.dump(2) + "\n" : markdown(points));
  if (!a.json_out.empty()) std::ofstream(a.json_out) << json.dump(2) << "\n";
  if (!a.plot_dir.empty()) write_plots(a.plot_dir, points);
}

}  // namespace

void register_bench_serve(CLI::App& bench) {
  auto a = std::make_shared<BenchServeArgs>();
  CLI::App* cmd = bench.add_subcommand("serve", "closed-loop serving benchmark over schedules and concurrencies");
  cmd->add_option("--target", a->target_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--draft", a->draft_dir, "drafter directory");
  cmd->add_option("--method", a->method, "dspark | dflash | eagle3 | ngram (default: from the drafter's config)");
  cmd->add_option("--schedule", a->schedules, "comma-separated: none, mtp1, fixed, threshold, dspark-sync, dspark-async")
      ->capture_default_str();
  cmd->add_option("--concurrency", a->concurrency, "comma-separated client counts")->capture_default_str();
  cmd->add_option("--prompts", a->prompts, "prompt file (JSONL)")->required();
  cmd->add_option("--prompt-format", a->prompt_format, "turns | instruction")->capture_default_str();
  cmd->add_option("--limit", a->limit, "prompts read from the file")->capture_default_str();
  cmd->add_option("--max-tokens", a->options.max_tokens, "new tokens per request")->capture_default_str();
  cmd->add_option("--temperature", a->options.sampling.temperature, "sampling temperature")->capture_default_str();
  cmd->add_option("--gamma", a->options.gamma, "drafts per request per step")->capture_default_str();
  cmd->add_option("--threshold", a->options.threshold, "survival cut of the threshold schedule")->capture_default_str();
  cmd->add_option("--requests-per-client", a->options.requests_per_client, "requests per point = max(32, concurrency x this)")
      ->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "runs per point (median reported); schedules alternate within each")
      ->capture_default_str();
  cmd->add_option("--sps", a->sps_file, "step-cost profile from `dspark profile --out` (default: the cached one)");
  cmd->add_option("--dtype", a->dtype, "weight dtype in memory: bf16 or f32")->capture_default_str();
  cmd->add_option("--plot-dir", a->plot_dir, "write serve_throughput.svg and serve_budget.svg here");
  cmd->add_option("--json-out", a->json_out, "also write the JSON table to this file");
  cmd->add_flag("--json", a->json, "print JSON instead of Markdown");
  cmd->callback([a] { run_bench_serve(*a); });
}

}  // namespace dspark::cli
