// dspark generate: generation from a prompt (text or ids), autoregressive or speculative with a
// drafter (--draft / --method), streamed as text, or one JSON object per sample with --json.
#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "draft/load_drafter.h"
#include "engine/autoregressive.h"
#include "engine/batch_engine.h"
#include "engine/speculative.h"
#include "tokenizer/stream_decoder.h"

namespace dspark::cli {

namespace {

struct GenerateArgs {
  std::string model_dir, dtype = "bf16";
  PromptArgs prompt;
  SamplingArgs sampling;
  bool ignore_eos = false, json = false;
  int64_t max_tokens = 128, num_samples = 1;
  // Speculative decoding
  std::string draft_dir, method;
  std::optional<int64_t> gamma;
  double confidence_threshold = 0;
  // Batched engine (engine/batch_engine.h): used when either is given.
  std::optional<int64_t> concurrency;
  std::string schedule, sps_file;
};

nlohmann::json stats_json(const engine::SpeculativeStats& s) {
  return {{"rounds", s.rounds},
          {"acceptance_length", s.acceptance_length()},
          {"draft_tokens_per_round", s.drafts_per_round()},
          {"accepted_per_position", s.accept_rate()},
          {"conditional_acceptance", s.conditional_accept_rate()},
          {"draft_seconds", s.draft_seconds},
          {"verify_seconds", s.verify_seconds}};
}

void run_generate(const GenerateArgs& args) {
  torch::NoGradGuard no_grad;
  const std::string dir = args.model_dir.empty() ? default_model_dir() : args.model_dir;
  model::Transformer model = model::Transformer::load(dir, {parse_weight_dtype(args.dtype)});
  const model::GenerationConfig generation = model::GenerationConfig::load_or_default(dir, model.config());
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(dir);

  engine::GenerationRequest request;
  request.prompt_ids = args.prompt.resolve(tok, dir);
  request.sampling = args.sampling.resolve(generation);
  request.max_tokens = args.max_tokens;
  if (!args.ignore_eos) request.stop_ids = generation.eos_token_ids;

  const bool speculative = !args.draft_dir.empty() || !args.method.empty();
  const bool batched = args.concurrency.has_value() || !args.schedule.empty();
  const int64_t concurrency = args.concurrency.value_or(1);
  if (concurrency < 1) throw Error("generate: --concurrency must be >= 1");
  std::unique_ptr<draft::Drafter> drafter;
  engine::SpeculativeOptions spec;
  if (speculative) {
    const int64_t capacity = drafter_capacity(static_cast<int64_t>(request.prompt_ids.size()) + args.max_tokens);
    drafter = draft::load_drafter(args.method, args.draft_dir, model,
                                  {.max_slots = batched ? concurrency : 1, .capacity = capacity,
                                   .weight_dtype = parse_weight_dtype(args.dtype)});
    spec.gamma = resolve_gamma(args.gamma, *drafter);
    spec.confidence_threshold = args.confidence_threshold;
  }

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

  std::vector<engine::GenerationResult> results;
  std::vector<engine::SpeculativeStats> stats;
  if (batched) {
    if (args.num_samples < 1) throw Error("generate: --num-samples must be >= 1");
    const schedule::ScheduleKind kind =
        schedule::parse_schedule_kind(args.schedule.empty() ? (speculative ? "dspark-async" : "none") : args.schedule);
    if (kind != schedule::ScheduleKind::kNone && !drafter) throw Error("generate: --schedule needs a drafter (--draft)");
    const int64_t gamma = drafter ? spec.gamma : 0;
    engine::StepCost cost;
    if (schedule::needs_sps_table(kind))
      cost = load_or_profile_step_cost(args.sps_file, model, drafter.get(), dir, args.draft_dir, args.dtype, concurrency, gamma);
    engine::BatchEngine batch(model, drafter.get(),
                              {.max_concurrency = concurrency,
                               .max_context = static_cast<int64_t>(request.prompt_ids.size()) + args.max_tokens,
                               .gamma = gamma, .schedule = kind, .step_cost = &cost});
    for (int64_t i = 0; i < args.num_samples; ++i) {
      engine::EngineRequest r{request.prompt_ids, request.sampling, request.max_tokens, request.stop_ids};
      r.sampling.seed = request.sampling.seed + static_cast<uint64_t>(i);
      if (stream) r.on_token = [&, i](int64_t id) { on_token(i, id); return true; };
      batch.submit(std::move(r));
    }
    std::vector<engine::RequestOutcome> outcomes = batch.run();
    std::sort(outcomes.begin(), outcomes.end(), [](const auto& x, const auto& y) { return x.id < y.id; });
    for (engine::RequestOutcome& o : outcomes) {
      engine::SpeculativeStats s;
      s.rounds = o.decode_steps;
      s.committed = o.accepted_drafts + o.decode_steps;
      s.proposed = o.verified_drafts;
      stats.push_back(s);
      results.push_back(std::move(o.result));
    }
    std::fprintf(stderr, "[engine: %s, concurrency %lld, %lld steps, mean budget %.2f drafts, acceptance length %.2f]\n",
                 schedule::schedule_kind_name(kind).c_str(), static_cast<long long>(concurrency),
                 static_cast<long long>(batch.stats().steps), batch.stats().mean_budget(), batch.stats().acceptance_length());
  } else if (speculative) {
    if (args.num_samples < 1) throw Error("generate: --num-samples must be >= 1");
    for (int64_t i = 0; i < args.num_samples; ++i) {  // one request at a time (batching: the scheduler)
      engine::GenerationRequest sample = request;
      sample.sampling.seed = request.sampling.seed + static_cast<uint64_t>(i);
      engine::SpeculativeResult r = engine::generate_speculative(model, *drafter, sample, spec, on_token);
      results.push_back(std::move(r.generation));
      stats.push_back(r.stats);
    }
  } else {
    results = engine::generate_autoregressive(model, request, args.num_samples, on_token);
  }

  for (size_t i = 0; i < results.size(); ++i) {
    const engine::GenerationResult& r = results[i];
    const std::string text = tok ? tok->decode(text_ids(r.ids)) : "";
    const double decode_seconds = r.seconds - r.prefill_seconds;
    const double rate = decode_seconds > 0 ? r.ids.size() / decode_seconds : 0.0;
    if (args.json) {
      nlohmann::json s = {{"prompt_tokens", r.prompt_tokens}, {"generated_tokens", r.ids.size()},
                          {"seconds", r.seconds}, {"prefill_seconds", r.prefill_seconds}, {"tokens_per_second", rate}};
      if (speculative || batched) s.update(stats_json(stats[i]));
      nlohmann::json out = {{"ids", r.ids}, {"text", text}, {"finish_reason", r.finish_reason}, {"stats", s}};
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      if (stream) std::cout << stream_decoder.flush() << "\n";
      else if (tok) std::cout << text << "\n";
      else std::cout << nlohmann::json(r.ids).dump() << "\n";
      std::string spec_line;
      if (speculative || batched)
        spec_line = ", " + std::to_string(stats[i].rounds) + " rounds, acceptance length " +
                    std::to_string(stats[i].acceptance_length()).substr(0, 5);
      std::fprintf(stderr, "[%lld prompt tokens, %zu generated in %.2f s, prefill %.2f s, %.2f tokens/s, %s%s]\n",
                   static_cast<long long>(r.prompt_tokens), r.ids.size(), r.seconds, r.prefill_seconds, rate,
                   r.finish_reason.c_str(), spec_line.c_str());
    }
  }
}

}  // namespace

void register_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text from a prompt");
  cmd->add_option("--model", args->model_dir, "model directory (default: the shipped default model)");
  args->prompt.add_to(cmd);
  cmd->add_option("--max-tokens", args->max_tokens, "new tokens per sample (default 128)");
  args->sampling.add_to(cmd);
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at end-of-sequence tokens");
  cmd->add_option("--num-samples", args->num_samples, "independent samples, decoded as one batch");
  cmd->add_flag("--json", args->json, "print one JSON object per sample");
  cmd->add_option("--dtype", args->dtype, "weight dtype in memory: bf16 (default) or f32");
  cmd->add_option("--draft", args->draft_dir, "drafter directory (DeepSpec layout): speculative decoding");
  cmd->add_option("--method", args->method, "dspark | dflash | eagle3 | ngram (default: from the drafter's config)");
  cmd->add_option("--gamma", args->gamma, "drafts per round (default: the drafter's block size, else 7)");
  cmd->add_option("--confidence-threshold", args->confidence_threshold,
                  "DSpark: cut each proposal at the first slot whose confidence is below this (0 = off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--concurrency", args->concurrency,
                  "run the samples through the batched engine with this many in flight (continuous batching)");
  cmd->add_option("--schedule", args->schedule,
                  "batched engine verification schedule: none, mtp1, fixed, threshold, dspark-sync, dspark-async "
                  "(default with a drafter: dspark-async)");
  cmd->add_option("--sps", args->sps_file, "step-cost profile from `dspark profile --out` (default: the cached one)");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace dspark::cli
