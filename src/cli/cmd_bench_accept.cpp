// dspark bench accept: acceptance of one or more drafters on prompt files (DeepSpec's protocol,
// bench/accept_bench.h), as one table (Markdown, or JSON with --json), the confidence head's ECE and
// ROC-AUC per file for drafters that have one, and, with --plot-dir, the plots of bench/accept_report.h.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/accept_report.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/json_file.h"
#include "common/progress.h"
#include "draft/load_drafter.h"

namespace dspark::cli {
namespace {

struct BenchAcceptArgs {
  std::string target_dir, drafts, prompts, prompt_format = "auto", plot_dir, thresholds, dtype = "auto", draft_dtypes = "auto";
  std::string kv_cache_dtype = "f32", json_out;
  int64_t limit = 0;
  bool json = false;
  bench::AcceptOptions options;
};

void run(BenchAcceptArgs a) {
  const std::string dir = a.target_dir.empty() ? default_model_dir() : a.target_dir;
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(dir);
  if (!tok) throw Error(dir + ": no tokenizer.json (prompts are rendered with the chat template)");
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype), parse_kv_cache_dtype(a.kv_cache_dtype)});
  const std::vector<std::string> draft_dirs = split_csv(a.drafts), files = split_csv(a.prompts);
  if (draft_dirs.empty() || files.empty()) throw Error("bench accept: give --draft and --prompts");
  std::vector<double> thresholds = {0.0};
  for (const double v : parse_numbers(a.thresholds, "--thresholds")) {
    if (v < 0 || v >= 1) throw Error("--thresholds: each value must be in [0, 1)");
    if (v > 0) thresholds.push_back(v);
  }
  std::vector<std::vector<std::string>> prompts;
  int64_t total_runs = 0;
  for (const std::string& f : files) prompts.push_back(bench::read_prompts(f, a.prompt_format, a.limit));

  bench::AcceptReport report{.files = files, .thresholds = thresholds, .options = a.options, .limit = a.limit};
  std::vector<std::string>& labels = report.drafters;
  std::vector<std::unique_ptr<draft::Drafter>> drafters;
  const std::vector<std::string> draft_dtypes = split_csv(a.draft_dtypes);
  if (draft_dtypes.empty()) throw Error("--draft-dtypes: give at least one");
  for (const std::string& d : draft_dirs)
    for (const std::string& name : draft_dtypes) {
      const model::WeightDType dtype = resolve_draft_dtype(name, target, "--draft-dtypes");
      drafters.push_back(draft::load_drafter("", d, target, {.max_slots = 1, .capacity = 8192, .weight_dtype = dtype}));
      resolve_gamma(a.options.gamma, *drafters.back());  // refused beyond a block (it ran the block, reported --gamma)
      labels.push_back(draft_dtype_label(drafter_label(d, *drafters.back()), name));
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
        const bench::AcceptResult result = bench::run_accept(
            target, *drafters[i], *tok, dir, prompts[f], o, [&](int64_t n) { progress.update(done = before + n, labels[i]); });
        // DeepSpec scores the confidence head only where every draft is verified.
        report.cells.push_back({labels[i], files[f], th, result.stats,
                                th == 0 ? bench::confidence_metrics(result.rounds, o.gamma) : std::nullopt});
      }
    }
  }
  progress.finish();
  if (!a.plot_dir.empty()) report.write_plots(a.plot_dir);
  const nlohmann::json out = report.to_json(dir);
  if (!a.json_out.empty()) write_json_file(a.json_out, out);
  std::cout << (a.json ? out.dump(2) + "\n" : report.markdown());
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
  cmd->add_option("--max-tokens", a->options.max_tokens, "new tokens per prompt")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--limit", a->limit, "first N prompts of each file (0: all)")
      ->check(at_least(0));
  cmd->add_option("--seed", a->options.seed, "prompt i samples with seed + i")->capture_default_str()->check(at_least(0));
  cmd->add_option("--thresholds", a->thresholds, "confidence thresholds to sweep for DSpark drafters, e.g. 0.1,0.2,...,0.9");
  cmd->add_option("--plot-dir", a->plot_dir, "write accept_per_position.svg (and threshold_sweep.svg) here")
      ->check(writable_dir());
  add_dtype_option(cmd, a->dtype, "target weights");
  add_draft_dtypes_option(cmd, a->draft_dtypes);
  add_kv_cache_dtype_option(cmd, a->kv_cache_dtype);
  cmd->add_flag("--json", a->json, "machine-readable output");
  cmd->add_option("--json-out", a->json_out, "also write the JSON results to this file (with the Markdown on stdout)")
      ->check(writable_file());
  cmd->callback([a] { run(*a); });
}

}  // namespace dspark::cli
