// dspark generate: autoregressive generation from a prompt (text or ids), streamed as text, or one
// JSON object per sample with --json.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "engine/autoregressive.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace dspark::cli {

namespace {

struct GenerateArgs {
  std::string model_dir, prompt, prompt_ids, dtype = "bf16";
  bool chat = false, ignore_eos = false, json = false;
  int64_t max_tokens = 128, num_samples = 1;
  std::optional<double> temperature, top_p, min_p;
  std::optional<int64_t> top_k;
  uint64_t seed = 0;
};

// Flags override the model's generation_config.json, as in Hugging Face and vLLM.
sampling::SamplingParams sampling_params(const GenerateArgs& args, const model::GenerationConfig& defaults) {
  sampling::SamplingParams params;
  params.temperature = defaults.do_sample ? defaults.temperature : 0.0;
  params.top_k = defaults.do_sample ? defaults.top_k : 0;
  params.top_p = defaults.do_sample ? defaults.top_p : 1.0;
  params.min_p = defaults.do_sample ? defaults.min_p : 0.0;
  if (args.temperature) params.temperature = *args.temperature;
  if (args.top_k) params.top_k = *args.top_k;
  if (args.top_p) params.top_p = *args.top_p;
  if (args.min_p) params.min_p = *args.min_p;
  params.seed = args.seed;
  sampling::check_sampling_params(params);
  return params;
}

std::vector<int64_t> prompt_ids(const GenerateArgs& args, const std::optional<tokenizer::Tokenizer>& tok,
                                const std::string& model_dir) {
  if (!args.prompt_ids.empty()) return parse_ids(args.prompt_ids, "--prompt-ids");
  if (!tok) throw Error(model_dir + ": no tokenizer.json; use --prompt-ids");
  std::string text = args.prompt;
  if (args.chat) text = tokenizer::ChatTemplate::load(model_dir).render(
        {{"user", args.prompt}}, {.add_generation_prompt = true, .enable_thinking = false});
  const std::vector<int32_t> ids = tok->encode(text);
  return {ids.begin(), ids.end()};
}

void run_generate(const GenerateArgs& args) {
  torch::NoGradGuard no_grad;
  if (args.prompt.empty() == args.prompt_ids.empty()) throw Error("give exactly one of --prompt and --prompt-ids");
  const std::string dir = args.model_dir.empty() ? default_model_dir() : args.model_dir;
  model::Transformer model = model::Transformer::load(dir, {parse_weight_dtype(args.dtype)});
  const model::GenerationConfig generation = model::GenerationConfig::load_or_default(dir, model.config());
  std::optional<tokenizer::Tokenizer> tok;
  if (std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) tok = tokenizer::Tokenizer::load(dir);

  engine::GenerationRequest request;
  request.prompt_ids = prompt_ids(args, tok, dir);
  request.sampling = sampling_params(args, generation);
  request.max_tokens = args.max_tokens;
  if (!args.ignore_eos) request.stop_ids = generation.eos_token_ids;

  // Models pad their embedding past the tokenizer's vocabulary; like Hugging Face, text skips ids
  // the tokenizer does not know (they stay in "ids").
  auto text_ids = [&](const std::vector<int64_t>& ids) {
    std::vector<int32_t> known;
    for (int64_t id : ids)
      if (tok && tok->has_id(static_cast<int32_t>(id))) known.push_back(static_cast<int32_t>(id));
    return known;
  };
  const bool stream = !args.json && args.num_samples == 1 && tok.has_value();
  tokenizer::StreamDecoder stream_decoder(tok ? &*tok : nullptr);
  engine::TokenCallback on_token;
  if (stream)
    on_token = [&](int64_t, int64_t id) {
      for (int32_t known : text_ids({id})) std::cout << stream_decoder.push(known) << std::flush;
    };
  const auto results = engine::generate_autoregressive(model, request, args.num_samples, on_token);

  for (const engine::GenerationResult& r : results) {
    const std::string text = tok ? tok->decode(text_ids(r.ids)) : "";
    const double decode_seconds = r.seconds - r.prefill_seconds;
    const double rate = decode_seconds > 0 ? r.ids.size() / decode_seconds : 0.0;
    if (args.json) {
      nlohmann::json out = {{"ids", r.ids}, {"text", text}, {"finish_reason", r.finish_reason},
                            {"stats", {{"prompt_tokens", r.prompt_tokens}, {"generated_tokens", r.ids.size()},
                                       {"seconds", r.seconds}, {"prefill_seconds", r.prefill_seconds},
                                       {"tokens_per_second", rate}}}};
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      if (stream) std::cout << stream_decoder.flush() << "\n";
      else if (tok) std::cout << text << "\n";
      else std::cout << nlohmann::json(r.ids).dump() << "\n";
      std::fprintf(stderr, "[%lld prompt tokens, %zu generated in %.2f s, prefill %.2f s, %.2f tokens/s, %s]\n",
                   static_cast<long long>(r.prompt_tokens), r.ids.size(), r.seconds, r.prefill_seconds, rate,
                   r.finish_reason.c_str());
    }
  }
}

}  // namespace

void register_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text from a prompt");
  cmd->add_option("--model", args->model_dir, "model directory (default: the shipped default model)");
  cmd->add_option("--prompt", args->prompt, "prompt text");
  cmd->add_option("--prompt-ids", args->prompt_ids, "prompt as comma-separated token ids");
  cmd->add_flag("--chat", args->chat, "wrap the prompt in the model's chat template (non-thinking)");
  cmd->add_option("--max-tokens", args->max_tokens, "new tokens per sample (default 128)");
  cmd->add_option("--temperature", args->temperature, "0 = greedy (default: generation_config.json)");
  cmd->add_option("--top-k", args->top_k, "keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass (1 = off)");
  cmd->add_option("--min-p", args->min_p, "drop tokens below min-p times the top probability (0 = off)");
  cmd->add_option("--seed", args->seed, "seed; sample i uses seed + i");
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at end-of-sequence tokens");
  cmd->add_option("--num-samples", args->num_samples, "independent samples, decoded as one batch");
  cmd->add_flag("--json", args->json, "print one JSON object per sample");
  cmd->add_option("--dtype", args->dtype, "weight dtype in memory: bf16 (default) or f32");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace dspark::cli
