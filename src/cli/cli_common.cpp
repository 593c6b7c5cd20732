#include "cli/cli_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>

#include <unistd.h>

#include "common/error.h"
#include "engine/request.h"
#include "model/gguf.h"
#include "tokenizer/chat_template.h"

#ifndef DSPARK_DEFAULT_MODEL_DIR
#define DSPARK_DEFAULT_MODEL_DIR ""
#endif

namespace dspark::cli {

std::vector<std::string> split_csv(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream s(csv);
  for (std::string item; std::getline(s, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<int64_t> parse_ids(const std::string& csv, const std::string& flag) {
  // getline drops a trailing empty field, so "1,2," would pass as "1,2": a typo, refused like ",1".
  if (!csv.empty() && csv.back() == ',') throw Error(flag + ": '' is not an integer token id");
  std::vector<int64_t> ids;
  std::stringstream stream(csv);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw Error(flag + ": '" + item + "' is not an integer token id");
    ids.push_back(value);
  }
  if (ids.empty()) throw Error(flag + ": no token ids given");
  return ids;
}

model::WeightDType parse_weight_dtype(const std::string& name, const std::string& flag) {
  for (model::WeightDType dtype :
       {model::WeightDType::kAuto, model::WeightDType::kF16, model::WeightDType::kBF16, model::WeightDType::kF32,
        model::WeightDType::kQ8_0, model::WeightDType::kQ4_0})
    if (name == model::weight_dtype_name(dtype)) return dtype;
  throw Error(flag + ": expected auto, f16, bf16, f32, q8_0 or q4_0, got '" + name + "'");
}

CLI::Option* add_dtype_option(CLI::App* cmd, std::string& dtype, const std::string& what) {
  return cmd->add_option("--dtype", dtype,
                  what + " in memory: auto (the checkpoint's precision), f16, bf16 or f32 (converted on load), "
                         "or q8_0 / q4_0 (llama.cpp's blocks, quantized at load; CPU)")
      ->capture_default_str();
}

CLI::Option* add_draft_dtype_option(CLI::App* cmd, std::string& dtype) {
  return cmd->add_option("--draft-dtype", dtype,
                         "the drafter's weights: auto (q8_0 on the CPU, else its checkpoint's precision), f16, bf16 or "
                         "f32, or q8_0 / q4_0 (quantized at load; CPU). Verification keeps the output exact at any "
                         "drafter precision")
      ->capture_default_str();
}

model::WeightDType resolve_draft_dtype(const std::string& name, const model::Transformer& target, const std::string& flag) {
  const model::WeightDType dtype = parse_weight_dtype(name, flag);
  if (dtype != model::WeightDType::kAuto) return dtype;
  return target.device().is_cpu() ? model::WeightDType::kQ8_0 : model::WeightDType::kAuto;
}

CLI::Option* add_draft_dtypes_option(CLI::App* cmd, std::string& dtypes) {
  return cmd->add_option("--draft-dtypes", dtypes,
                         "comma-separated drafter weight dtypes (as generate's --draft-dtype): each drafter runs in each; "
                         "the table names all but auto")
      ->capture_default_str();
}

std::string draft_dtype_label(const std::string& label, const std::string& dtype_name) {
  return dtype_name == "auto" ? label : label + " (" + dtype_name + ")";
}

model::KvCacheDType parse_kv_cache_dtype(const std::string& name, const std::string& flag) {
  for (model::KvCacheDType dtype : {model::KvCacheDType::kF32, model::KvCacheDType::kBF16})
    if (name == model::kv_cache_dtype_name(dtype)) return dtype;
  throw Error(flag + ": expected f32 or bf16, got '" + name + "'");
}

CLI::Option* add_kv_cache_dtype_option(CLI::App* cmd, std::string& dtype) {
  return cmd->add_option("--kv-cache-dtype", dtype,
                         "the target's KV cache: f32 (keys and values as computed) or bf16 (half the memory and "
                         "the bytes a step reads; rounded once when written)")
      ->capture_default_str();
}

std::string default_model_dir() {
  const std::filesystem::path dir(DSPARK_DEFAULT_MODEL_DIR);
  if (!dir.empty() && std::filesystem::exists(dir / "config.json")) return dir.string();
  throw Error("no default model found (expected " + dir.string() + "/config.json); pass --model DIR");
}

std::optional<tokenizer::Tokenizer> load_tokenizer_if_present(const std::string& model_dir) {
  if (model::is_gguf_path(model_dir))
    return model::GgufFile::open(model_dir).has("tokenizer.ggml.tokens") ? tokenizer::Tokenizer::load(model_dir)
                                                                         : std::optional<tokenizer::Tokenizer>();
  if (!std::filesystem::exists(std::filesystem::path(model_dir) / "tokenizer.json")) return std::nullopt;
  return tokenizer::Tokenizer::load(model_dir);
}

std::vector<int32_t> known_ids(const tokenizer::Tokenizer& tok, const std::vector<int64_t>& ids) {
  std::vector<int32_t> known;
  for (int64_t id : ids)
    if (tok.has_id(static_cast<int32_t>(id))) known.push_back(static_cast<int32_t>(id));
  return known;
}

nlohmann::json stats_json(const engine::RequestStats& s) {
  // Rates with nothing to count are null, not a measured 0: the decode rate of a single token, the
  // acceptance of a request that took no decode step.
  const auto unless = [](bool undefined, double value) { return undefined ? nlohmann::json() : nlohmann::json(value); };
  return {{"prompt_tokens", s.prompt_tokens},
          {"generated_tokens", s.generated_tokens},
          {"queued_seconds", s.queued_seconds},
          {"first_token_seconds", s.first_token_seconds},
          {"seconds", s.seconds},
          {"tokens_per_second", unless(s.generated_tokens < 2, s.decode_tokens_per_second())},
          {"num_steps", s.num_steps},
          {"num_drafts", s.num_drafts},
          {"num_draft_tokens", s.num_draft_tokens},
          {"num_accepted_tokens", s.num_accepted_tokens},
          {"num_accepted_tokens_per_pos", s.num_accepted_tokens_per_pos},
          {"acceptance_length", unless(s.num_steps == 0, s.acceptance_length())},
          {"mean_acceptance_length", unless(s.num_steps == 0, s.mean_acceptance_length())},
          {"acceptance_rate", unless(s.num_draft_tokens == 0, s.acceptance_rate())},
          {"conditional_acceptance", s.conditional_accept_rate()}};
}

std::string drafter_label(const std::string& dir, const draft::Drafter& drafter) {
  const std::filesystem::path path(dir);
  return path.filename() == "model" ? path.parent_path().filename().string() + "/" + drafter.method()
                                    : path.filename().string();
}

int64_t resolve_gamma(const std::optional<int64_t>& flag, const draft::Drafter& drafter) {
  const int64_t limit = drafter.max_gamma();
  const int64_t gamma = flag.value_or(limit > 0 ? limit : 7);
  if (gamma < 0) throw Error("--gamma must be >= 0, got " + std::to_string(gamma));
  if (limit > 0 && gamma > limit)
    throw Error("--gamma " + std::to_string(gamma) + " exceeds the drafter's block size " + std::to_string(limit));
  // Drafters without a block (EAGLE-3, n-gram): the draft cache keeps this margin past a request.
  if (limit == 0 && gamma > kMaxUnblockedGamma)
    throw Error("--gamma " + std::to_string(gamma) + ": at most " + std::to_string(kMaxUnblockedGamma) +
                " drafts per step for the " + drafter.method() + " drafter");
  return gamma;
}

std::optional<double> parse_number(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size()) return std::nullopt;
  return v;
}

namespace {

std::string number_text(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// A numeric check: `ok` on the parsed value, `wants` saying what passes.
CLI::Validator numeric_check(std::function<bool(double)> ok, const std::string& wants) {
  return CLI::Validator(
      [ok, wants](std::string& text) -> std::string {
        const std::optional<double> v = parse_number(text);
        if (!v) return "'" + text + "' is not a number";
        if (!std::isfinite(*v) || !ok(*v)) return "must be " + wants + ", got " + text;
        return "";
      },
      wants);
}

}  // namespace

CLI::Validator at_least(double min) {
  return numeric_check([min](double v) { return v >= min; }, ">= " + number_text(min));
}

CLI::Validator above(double min) {
  return numeric_check([min](double v) { return v > min; }, "> " + number_text(min));
}

CLI::Validator between(double min, double max) {
  return numeric_check([min, max](double v) { return v >= min && v <= max; },
                       "in [" + number_text(min) + ", " + number_text(max) + "]");
}

namespace {

// "" when `dir` exists as a writable directory or could be made inside the nearest one that does.
std::string creatable_dir(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(dir.empty() ? fs::path(".") : dir, ec);
  while (!fs::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  if (!fs::is_directory(p, ec)) return p.string() + " is not a directory";
  if (::access(p.c_str(), W_OK) != 0) return p.string() + " is not writable";
  return "";
}

}  // namespace

CLI::Validator writable_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        namespace fs = std::filesystem;
        if (fs::is_directory(path)) return path + " is a directory";
        const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
        if (!fs::is_directory(parent)) return "no directory " + parent.string() + " to write " + path + " in";
        return creatable_dir(parent);
      },
      "FILE");
}

CLI::Validator writable_dir() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (std::filesystem::exists(path) && !std::filesystem::is_directory(path)) return path + " is not a directory";
        return creatable_dir(path);
      },
      "DIR");
}

std::vector<double> parse_numbers(const std::string& csv, const std::string& option) {
  std::vector<double> values;
  for (const std::string& item : split_csv(csv)) {
    const std::optional<double> v = parse_number(item);
    if (!v || !std::isfinite(*v)) throw Error(option + ": '" + item + "' is not a number");
    values.push_back(*v);
  }
  return values;
}

int64_t drafter_capacity(int64_t request_positions) {
  return std::max(request_positions, engine::ProfileOptions{}.context) + kMaxUnblockedGamma;
}

engine::StepCost load_or_profile_step_cost(const std::string& sps_file, model::Transformer& target,
                                           draft::Drafter* drafter, const std::string& model_dir,
                                           const std::string& draft_dir, model::WeightDType draft_dtype,
                                           int64_t max_requests, int64_t gamma, int64_t context) {
  const schedule::SpsMeta meta = engine::step_cost_meta(model_dir, target, draft_dir, draft_dtype);
  if (!sps_file.empty()) {
    // A profile named on the command line is used as given (the cache is keyed by the setup; a
    // file is the user's choice), but one measured for another setup plans with that setup's
    // step costs: each difference is said.
    const engine::StepCost cost = engine::StepCost::load(sps_file);
    auto warn = [&](const std::string& what) { std::fprintf(stderr, "dspark: warning: --sps %s %s\n", sps_file.c_str(), what.c_str()); };
    if (cost.meta.model_id != meta.model_id)
      warn("was measured for " + cost.meta.model_id + ", this run is " + meta.model_id);
    if (cost.meta.dtype != meta.dtype) warn("was measured with " + cost.meta.dtype + " weights, this run has " + meta.dtype);
    if (cost.meta.device != meta.device) warn("was measured on " + cost.meta.device + ", this run is on " + meta.device);
    if (cost.meta.machine_id != meta.machine_id)
      warn("was measured on host " + cost.meta.machine_id + ", this is " + meta.machine_id);
    if (drafter && cost.draft_seconds.empty()) warn("was measured without a drafter: drafting is planned as free");
    if (drafter && cost.gamma != gamma)
      warn("was measured at gamma " + std::to_string(cost.gamma) + ", this run drafts " + std::to_string(gamma));
    return cost;
  }
  engine::ProfileOptions options{.max_requests = max_requests, .gamma = gamma};
  if (context > 0) options.context = context;
  return engine::cached_step_cost(engine::default_cache_dir(), target, drafter, options, meta);
}


void PromptArgs::add_to(CLI::App* cmd) {
  cmd->add_option("--prompt", prompt, "prompt text");
  cmd->add_option("--prompt-ids", prompt_ids, "prompt as comma-separated token ids");
  cmd->add_flag("--chat", chat, "wrap the prompt in the model's chat template (non-thinking)");
}

std::vector<int64_t> PromptArgs::resolve(const std::optional<tokenizer::Tokenizer>& tok, const std::string& model_dir) const {
  if (prompt.has_value() == prompt_ids.has_value()) throw Error("give exactly one of --prompt and --prompt-ids");
  if (prompt_ids) {
    if (chat) throw Error("--chat renders a text prompt; it does not apply to --prompt-ids");
    return parse_ids(*prompt_ids, "--prompt-ids");
  }
  if (prompt->empty() && !chat) throw Error("--prompt is empty");
  if (!tok)
    throw Error(model_dir + (model::is_gguf_path(model_dir) ? ": no tokenizer in the file's metadata" : ": no tokenizer.json") +
                "; use --prompt-ids");
  std::string text = *prompt;
  if (chat)
    text = tokenizer::ChatTemplate::load(model_dir).render({{"user", *prompt}},
                                                           {.add_generation_prompt = true, .enable_thinking = false});
  const std::vector<int32_t> ids = tok->encode(text);
  return {ids.begin(), ids.end()};
}

void SamplingArgs::add_to(CLI::App* cmd, const std::string& defaults) {
  cmd->add_option("--temperature", temperature, "0 (anything below 1e-5) = greedy (default: " + defaults + ")");
  cmd->add_option("--top-k", top_k, "keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", top_p, "nucleus sampling mass (1 = off)");
  cmd->add_option("--min-p", min_p, "drop tokens below min-p times the top probability (0 = off)");
  cmd->add_option("--seed", seed, "seed; sample i uses seed + i (default 0: a run repeats)")->check(at_least(0));
}

// Flags override the model's generation_config.json, as in Hugging Face and vLLM.
sampling::SamplingParams SamplingArgs::resolve(const model::GenerationConfig& defaults) const {
  sampling::SamplingParams params = engine::sampling_defaults(defaults);
  if (temperature) params.temperature = *temperature;
  if (top_k) params.top_k = *top_k;
  if (top_p) params.top_p = *top_p;
  if (min_p) params.min_p = *min_p;
  params.seed = seed;
  sampling::check_sampling_params(params);
  return params;
}

}  // namespace dspark::cli
