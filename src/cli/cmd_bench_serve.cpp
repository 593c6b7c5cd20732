// dspark bench serve: closed-loop clients over the batched engine for each schedule and
// concurrency (bench/serve_bench.h); a Markdown or JSON table and, with --plot-dir, aggregate
// throughput against tokens/s per user (the paper's Figure 7) and the verification budget against
// concurrency (Figure 8) as SVG files.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "bench/accept_bench.h"
#include "bench/serve_report.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "draft/load_drafter.h"
#include "model/config.h"

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

void run_bench_serve(const BenchServeArgs& a) {
  torch::NoGradGuard no_grad;
  if (a.prompts.empty()) throw Error("bench serve: --prompts is required");
  const std::string dir = a.target_dir.empty() ? default_model_dir() : a.target_dir;
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype)});
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(fs::path(dir));
  const std::vector<std::vector<int64_t>> prompts =
      bench::chat_prompt_ids(dir, tok, bench::read_prompts(a.prompts, a.prompt_format, a.limit));
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

  const std::vector<bench::ServePoint> points =
      bench::run_serve_sweep(target, drafter.get(), cost, kinds, levels, prompts, o, a.repeats, [](const bench::ServePoint& p, int64_t rep) {
        std::fprintf(stderr, "%s C=%ld run %ld: %.1f tok/s aggregate, %.1f tok/s/user, budget %.2f, acceptance %.2f\n",
                     p.schedule.c_str(), static_cast<long>(p.concurrency), static_cast<long>(rep + 1), p.aggregate_tps,
                     p.user_tps_mean, p.mean_budget, p.acceptance_length);
      });
  nlohmann::json json = nlohmann::json::array();
  for (const auto& p : points) json.push_back(bench::to_json(p));
  std::cout << (a.json ? json.dump(2) + "\n" : bench::serve_markdown(points));
  if (!a.json_out.empty() && !(std::ofstream(a.json_out) << json.dump(2) << "\n")) throw Error(a.json_out + ": cannot write");
  if (!a.plot_dir.empty()) bench::write_serve_plots(a.plot_dir, points);
}

}  // namespace

void register_bench_serve(CLI::App& bench) {
  auto a = std::make_shared<BenchServeArgs>();
  CLI::App* cmd = bench.add_subcommand("serve", "closed-loop serving benchmark over schedules and concurrencies");
  cmd->add_option("--target", a->target_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--draft", a->draft_dir, "drafter directory");
  cmd->add_option("--method", a->method, "dspark | dflash | eagle3 | ngram (default: from the drafter's config)");
  cmd->add_option("--schedule", a->schedules, "comma-separated, of: " + schedule::cli_schedule_names())
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
