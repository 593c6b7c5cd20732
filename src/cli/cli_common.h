// Small helpers shared by the subcommands: parsing flag values, locating models, and the prompt
// and sampling flags that generate, draft and the benchmarks share.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "draft/drafter.h"
#include "engine/request_stats.h"
#include "engine/step_cost.h"
#include "model/config.h"
#include "model/transformer.h"
#include "sampling/sampling.h"
#include "tokenizer/tokenizer.h"

namespace dspark::cli {

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_csv(const std::string& csv);
// "1,2,3" -> {1, 2, 3}; throws dspark::Error naming the bad element.
std::vector<int64_t> parse_ids(const std::string& csv, const std::string& flag);
// "auto" | "f16" | "bf16" | "f32" -> weight dtype; throws dspark::Error otherwise.
model::WeightDType parse_weight_dtype(const std::string& name, const std::string& flag = "--dtype");
// --dtype into `dtype` (default "auto"), described as the dtype of `what`.
CLI::Option* add_dtype_option(CLI::App* cmd, std::string& dtype, const std::string& what = "weight dtype");
// --draft-dtype into `dtype` (default "auto"): the drafter's weights, whatever the target's.
CLI::Option* add_draft_dtype_option(CLI::App* cmd, std::string& dtype);
// A --draft-dtype value for a drafter of `target`: "auto" is q8_0 where the target runs on the CPU
// (a drafter's numerics shape only its proposals and verification keeps the output exact, so it
// streams half the bytes per drafting call: docs/benchmarks.md) and the drafter checkpoint's
// precision elsewhere; the others as parse_weight_dtype.
model::WeightDType resolve_draft_dtype(const std::string& name, const model::Transformer& target,
                                       const std::string& flag = "--draft-dtype");
// --draft-dtypes into `dtypes` (default "auto"), for benchmarks that run each drafter in each; the
// names in split_csv(dtypes), each resolved later by resolve_draft_dtype.
CLI::Option* add_draft_dtypes_option(CLI::App* cmd, std::string& dtypes);
// A benchmark row's name for a drafter run in --draft-dtypes entry `dtype_name`: `label`, followed
// by the entry unless it is "auto".
std::string draft_dtype_label(const std::string& label, const std::string& dtype_name);
// "f32" | "bf16" -> KV cache dtype; throws dspark::Error otherwise.
model::KvCacheDType parse_kv_cache_dtype(const std::string& name, const std::string& flag = "--kv-cache-dtype");
// --kv-cache-dtype into `dtype` (default "f32"): the element type of the target's KV cache.
CLI::Option* add_kv_cache_dtype_option(CLI::App* cmd, std::string& dtype);
// The shipped default model (models/default in the source tree), or an error saying to pass --model.
std::string default_model_dir();
// The tokenizer in a model directory (or in a .gguf file's metadata), if it has one.
std::optional<tokenizer::Tokenizer> load_tokenizer_if_present(const std::string& model_dir);

// The ids the tokenizer knows: models pad their embedding past the tokenizer's vocabulary and,
// like Hugging Face, text skips the padding ids (they stay in "ids").
std::vector<int32_t> known_ids(const tokenizer::Tokenizer& tok, const std::vector<int64_t>& ids);

// A request's statistics as the CLI prints them: the counters (vLLM's names) and their ratios.
nlohmann::json stats_json(const engine::RequestStats& stats);

// A drafter's name in benchmark tables: its directory's name (a training run's model/ folder is
// named by the run, e.g. "drafter-20l/dspark").
std::string drafter_label(const std::string& dir, const draft::Drafter& drafter);

// Checks for numeric options (CLI11 reports a failure as one line naming the option): a finite
// number >= min, or > min, or within [min, max]. On a vector option each value is checked.
CLI::Validator at_least(double min);
CLI::Validator above(double min);
CLI::Validator between(double min, double max);

// Checks for output paths written at the end of a long run, so a mistyped one fails before the
// work: a file in an existing writable directory, not itself a directory; a directory that
// exists as one, or can be made under a writable one.
CLI::Validator writable_file();
CLI::Validator writable_dir();

// The whole of `text` as a number (stod's syntax, "inf" and "nan" included); nullopt otherwise.
std::optional<double> parse_number(const std::string& text);

// A comma-separated list of numbers, each checked by the caller; "--name: 'x' is not a number"
// otherwise.
std::vector<double> parse_numbers(const std::string& csv, const std::string& option);

// The most drafts per step for a drafter without a block (EAGLE-3, n-gram): a request's draft cache
// keeps this many positions past its own (drafter_capacity).
inline constexpr int64_t kMaxUnblockedGamma = 64;

// --gamma, defaulting to the drafter's largest proposal (its block size), else 7; throws if it is
// negative or the drafter cannot propose that many.
int64_t resolve_gamma(const std::optional<int64_t>& flag, const draft::Drafter& drafter);

// The drafter cache capacity for requests of up to `request_positions` positions (prompt plus new
// tokens), with room left for a block, that also holds what load_or_profile_step_cost measures on
// that drafter on first use (engine::ProfileOptions::context cached positions plus a block).
int64_t drafter_capacity(int64_t request_positions);

// The step-cost profile the dspark-sync / dspark-async schedules need: `sps_file` if given, else
// the profile cached for this model, drafter, machine and the target's weight dtype (measured and
// saved on first use, with progress). max_requests: the largest concurrency it must cover;
// context: the cached positions a typical step attends to (0: the profile's default, 256).
engine::StepCost load_or_profile_step_cost(const std::string& sps_file, model::Transformer& target,
                                           draft::Drafter* drafter, const std::string& model_dir,
                                           const std::string& draft_dir, model::WeightDType draft_dtype,
                                           int64_t max_requests, int64_t gamma, int64_t context = 0);

// --prompt TEXT | --prompt-ids IDS, with --chat.
struct PromptArgs {
  std::optional<std::string> prompt, prompt_ids;
  bool chat = false;
  void add_to(CLI::App* cmd);
  // Throws unless exactly one of --prompt / --prompt-ids was given, or text is given without a tokenizer.
  std::vector<int64_t> resolve(const std::optional<tokenizer::Tokenizer>& tok, const std::string& model_dir) const;
};

// --temperature --top-k --top-p --min-p --seed; unset flags take the defaults resolve() is given
// (the model's generation_config.json, for most commands), which --temperature's help names.
struct SamplingArgs {
  std::optional<double> temperature, top_p, min_p;
  std::optional<int64_t> top_k;
  uint64_t seed = 0;
  void add_to(CLI::App* cmd, const std::string& defaults = "generation_config.json");
  sampling::SamplingParams resolve(const model::GenerationConfig& defaults) const;
};

}  // namespace dspark::cli
