// dspark bench draft: one drafting call's time against gamma, per drafter type.
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/draft_bench.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/threads.h"

namespace dspark::cli {

namespace {

struct BenchDraftArgs {
  std::string target_dir, dtype = "auto", work_dir = "bench-results/drafters";
  std::string methods = "dspark,dflash,eagle3";
  bool json = false;
  bench::DraftBenchOptions options;
};

void run(BenchDraftArgs args) {
  const std::string dir = args.target_dir.empty() ? default_model_dir() : args.target_dir;
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(args.dtype)});
  args.options.methods.clear();
  std::stringstream list(args.methods);
  for (std::string m; std::getline(list, m, ',');) args.options.methods.push_back(m);
  args.options.work_dir = args.work_dir;
  auto progress = [](const std::string& s) { std::fprintf(stderr, "bench draft: %s\n", s.c_str()); };
  const std::vector<bench::DraftPoint> points = bench::run_draft_bench(target, args.options, progress);

  std::map<std::pair<std::string, int64_t>, double> ms;
  for (const auto& p : points) ms[{p.method, p.gamma}] = p.median_ms;
  const bool have_ratio = ms.count({"dspark", 7}) && ms.count({"dflash", 7});
  const double markov_overhead = have_ratio ? ms[{"dspark", 7}] / ms[{"dflash", 7}] - 1.0 : 0.0;
  if (args.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& p : points) j.push_back({{"method", p.method}, {"gamma", p.gamma}, {"median_ms", p.median_ms}, {"runs_ms", p.runs_ms}});
    nlohmann::json out = {{"target", dir}, {"threads", model::num_threads()}, {"context", args.options.context}, {"points", j}};
    if (have_ratio) out["dspark_over_dflash_at_gamma7"] = markov_overhead;
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("%-8s %6s %10s\n", "method", "gamma", "median_ms");
  for (const auto& p : points) std::printf("%-8s %6lld %10.3f\n", p.method.c_str(), static_cast<long long>(p.gamma), p.median_ms);
  if (have_ratio) std::printf("DSpark heads (Markov + confidence, serial sampling) add %.1f%% to DFlash at gamma 7\n", 100 * markov_overhead);
}

}  // namespace

void register_bench_draft(CLI::App& bench) {
  auto args = std::make_shared<BenchDraftArgs>();
  CLI::App* cmd = bench.add_subcommand("draft", "one drafting call's time against gamma (random drafters of the target's shape)");
  cmd->add_option("--target", args->target_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--methods", args->methods, "comma-separated drafter methods")->capture_default_str();
  cmd->add_option("--gammas", args->options.gammas, "gamma values")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--context", args->options.context, "committed context before the timed calls")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--runs", args->options.runs, "timed calls per point (median reported)")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--work-dir", args->work_dir, "where the random drafters are written")->capture_default_str();
  add_dtype_option(cmd, args->dtype);
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([args] { run(*args); });
}

}  // namespace dspark::cli
