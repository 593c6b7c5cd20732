// dspark bench speedup: single-request tokens/s of autoregressive decoding, n-gram drafting and
// each drafter on prompt files, side by side (bench/speedup_bench.h), as one Markdown table per
// temperature, or JSON.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "bench/accept_bench.h"
#include "bench/speedup_bench.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/json_file.h"
#include "common/progress.h"
#include "draft/load_drafter.h"
#include "schedule/schedule_kind.h"

namespace dspark::cli {
namespace {

struct BenchSpeedupArgs {
  std::string target_dir, drafts, prompts, prompt_format = "auto", temperatures = "0,1", schedule = "dspark-sync";
  std::string dtype = "auto", draft_dtypes = "auto", kv_cache_dtype = "f32", json_out;
  std::optional<int64_t> gamma;
  int64_t limit = 40;
  bool ngram = false, json = false;
  bench::SpeedupOptions options;
};

std::vector<double> parse_temperatures(const std::string& csv) {
  const std::vector<double> out = parse_numbers(csv, "--temperatures");
  for (double t : out)
    if (t < 0) throw Error("--temperatures: " + std::to_string(t) + " is not a temperature >= 0");
  if (out.empty()) throw Error("--temperatures: give at least one");
  return out;
}

void run(BenchSpeedupArgs a) {
  torch::NoGradGuard no_grad;
  a.options.temperatures = parse_temperatures(a.temperatures);
  const schedule::ScheduleKind kind = schedule::parse_schedule_kind(a.schedule);
  if (kind == schedule::ScheduleKind::kNone) throw Error("bench speedup: --schedule none drafts nothing; pick fixed or a dspark schedule");
  const std::string dir = a.target_dir.empty() ? default_model_dir() : a.target_dir;
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(dir);
  if (!tok) throw Error(dir + ": no tokenizer.json (prompts are rendered with the chat template)");
  const std::vector<std::string> draft_dirs = split_csv(a.drafts), files = split_csv(a.prompts);
  if (files.empty()) throw Error("bench speedup: give --prompts");
  if (draft_dirs.empty() && !a.ngram) throw Error("bench speedup: give --draft and/or --ngram");
  std::vector<std::vector<std::vector<int64_t>>> prompts;
  for (const std::string& f : files)
    prompts.push_back(bench::chat_prompt_ids(dir, *tok, bench::read_prompts(f, a.prompt_format, a.limit)));

  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype), parse_kv_cache_dtype(a.kv_cache_dtype)});
  const model::GenerationConfig generation = model::GenerationConfig::load_or_default(dir, target.config());
  std::vector<std::vector<int64_t>> all_prompts;
  for (const auto& file : prompts) all_prompts.insert(all_prompts.end(), file.begin(), file.end());
  int64_t longest = 0;
  for (const auto& p : all_prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  const draft::DrafterLoadOptions load{.max_slots = 1, .capacity = drafter_capacity(longest + a.options.max_tokens)};
  const std::vector<std::string> draft_dtypes = split_csv(a.draft_dtypes);
  if (draft_dtypes.empty()) throw Error("--draft-dtypes: give at least one");
  std::vector<std::unique_ptr<draft::Drafter>> drafters;
  std::vector<std::string> sources, dtype_names;  // each drafter's directory ("" for n-gram) and --draft-dtypes entry
  std::vector<model::WeightDType> loaded_dtypes;  // and the dtype it was loaded in
  if (a.ngram) {
    drafters.push_back(draft::load_drafter("ngram", "", target, load));
    sources.push_back("");
    dtype_names.push_back("auto");
    loaded_dtypes.push_back(model::WeightDType::kAuto);
  }
  for (const std::string& d : draft_dirs)
    for (const std::string& name : draft_dtypes) {
      draft::DrafterLoadOptions options = load;
      options.weight_dtype = resolve_draft_dtype(name, target, "--draft-dtypes");
      drafters.push_back(draft::load_drafter("", d, target, options));
      sources.push_back(d);
      dtype_names.push_back(name);
      loaded_dtypes.push_back(options.weight_dtype);
    }
  std::vector<engine::StepCost> costs(drafters.size());  // stable addresses: the methods point into it
  std::vector<bench::SpeedupMethod> methods = {{.label = "autoregressive"}};
  for (size_t i = 0; i < drafters.size(); ++i) {
    const int64_t gamma = resolve_gamma(a.gamma, *drafters[i]);
    if (schedule::needs_sps_table(kind))
      costs[i] = load_or_profile_step_cost("", target, drafters[i].get(), dir, sources[i], loaded_dtypes[i], 1, gamma,
                                           engine::typical_context(all_prompts, a.options.max_tokens));
    methods.push_back({.label = sources[i].empty() ? "ngram" : draft_dtype_label(drafter_label(sources[i], *drafters[i]), dtype_names[i]),
                       .drafter = drafters[i].get(),
                       .gamma = gamma,
                       .schedule = kind,
                       .step_cost = schedule::needs_sps_table(kind) ? &costs[i] : nullptr});
  }

  int64_t total = 0;
  for (const auto& p : prompts) total += static_cast<int64_t>(p.size() * methods.size() * a.options.temperatures.size());
  Progress progress("bench speedup", total, "request");
  const std::vector<bench::SpeedupRun> runs = bench::run_speedup(
      target, methods, prompts, generation.eos_token_ids, a.options, [&](int64_t n) { progress.update(n); });
  progress.finish();

  bench::SpeedupReport report{.options = a.options};
  for (const auto& m : methods) report.methods.push_back(m.label);
  for (const std::string& f : files) report.files.push_back(std::filesystem::path(f).stem().string());
  report.cells = bench::summarize_speedup(runs, static_cast<int64_t>(methods.size()), static_cast<int64_t>(files.size()));
  nlohmann::json out = report.to_json();
  out["target"] = dir;
  out["schedule"] = a.schedule;
  if (!a.json_out.empty()) write_json_file(a.json_out, out);
  std::cout << (a.json ? out.dump(2) + "\n" : report.markdown());
}

}  // namespace

void register_bench_speedup(CLI::App& bench) {
  auto a = std::make_shared<BenchSpeedupArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "speedup", "single-request tokens/s: autoregressive against n-gram and drafters, side by side on prompt files");
  cmd->add_option("--target", a->target_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--draft", a->drafts, "comma-separated drafter directories");
  cmd->add_flag("--ngram", a->ngram, "also n-gram (prompt lookup) drafting");
  cmd->add_option("--prompts", a->prompts, "comma-separated prompt files ({\"turns\": [...]} JSONL)")->required();
  cmd->add_option("--prompt-format", a->prompt_format, "auto | turns | instruction (Self-Instruct's user-oriented file)")
      ->capture_default_str();
  cmd->add_option("--limit", a->limit, "first N prompts of each file (0: all)")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--temperatures", a->temperatures, "comma-separated sampling temperatures (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--max-tokens", a->options.max_tokens, "new tokens per request, at most")->capture_default_str()
      ->check(at_least(1));
  cmd->add_flag("--ignore-eos", a->options.ignore_eos, "always generate --max-tokens tokens");
  cmd->add_option("--gamma", a->gamma, "drafts per step (default: each drafter's block size)");
  cmd->add_option("--schedule", a->schedule, "verification schedule of the speculative methods (as generate's --schedule)")
      ->capture_default_str();
  cmd->add_option("--seed", a->options.seed, "prompt i samples with seed + i under every method")->capture_default_str()->check(at_least(0));
  add_dtype_option(cmd, a->dtype, "target weights");
  add_draft_dtypes_option(cmd, a->draft_dtypes);
  add_kv_cache_dtype_option(cmd, a->kv_cache_dtype);
  cmd->add_flag("--json", a->json, "machine-readable output");
  cmd->add_option("--json-out", a->json_out, "also write the JSON results to this file (with the Markdown on stdout)")
      ->check(writable_file());
  cmd->callback([a] { run(*a); });
}

}  // namespace dspark::cli
