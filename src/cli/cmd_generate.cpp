// dspark generate: generation from a prompt (text or ids) through the engine, autoregressive or
// speculative with a drafter (--draft / --method), streamed as text, or one JSON object per sample
// with --json. --num-samples N submits N requests (seeds seed .. seed + N - 1), --concurrency of
// them in flight at once.
#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "draft/dspark_drafter.h"
#include "draft/load_drafter.h"
#include "engine/engine.h"
#include "tokenizer/stream_decoder.h"

namespace dspark::cli {

namespace {

struct GenerateArgs {
  std::string model_dir, dtype = "auto", draft_dtype = "auto", kv_cache_dtype = "f32";
  PromptArgs prompt;
  SamplingArgs sampling;
  bool ignore_eos = false, json = false;
  int64_t max_tokens = 128, num_samples = 1, max_context = 0;
  // Speculative decoding
  std::string draft_dir, method;
  std::optional<int64_t> gamma;
  double confidence_threshold = 0;
  std::optional<int64_t> concurrency;
  std::string schedule, sps_file;
  double threshold = 0.5;
};

// dspark-sync for one request in flight: its budget follows this step's confidences and the
// profiled costs, which on the 67M default target beat verifying every draft (`fixed`) by 1.12x at
// T = 0 and 1.27x at T = 1 (docs/results.md); dspark-async for more, where the schedule overlaps.
schedule::ScheduleKind default_schedule(bool speculative, int64_t concurrency) {
  if (!speculative) return schedule::ScheduleKind::kNone;
  return concurrency > 1 ? schedule::ScheduleKind::kDsparkAsync : schedule::ScheduleKind::kDsparkSync;
}

void print_sample(const engine::RequestOutcome& o, const std::optional<tokenizer::Tokenizer>& tok, bool json,
                  bool streamed, bool speculative) {
  const engine::RequestStats& s = o.stats;
  const std::string text = tok ? tok->decode(known_ids(*tok, o.ids)) : "";
  if (json) {
    const nlohmann::json out = {{"ids", o.ids}, {"text", text}, {"finish_reason", o.finish_reason}, {"stats", stats_json(s)}};
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  if (!streamed) std::cout << (tok ? text : nlohmann::json(o.ids).dump()) << "\n";
  char spec[128] = "";
  if (speculative && s.num_steps > 0)
    std::snprintf(spec, sizeof spec, ", %lld steps, acceptance length %.2f", static_cast<long long>(s.num_steps),
                  s.acceptance_length());
  else if (speculative)
    std::snprintf(spec, sizeof spec, ", no decode step");
  // The decode rate counts the tokens after the first over the time after it: none with one token.
  char rate[48] = "no decode rate";
  if (s.generated_tokens > 1) std::snprintf(rate, sizeof rate, "%.2f tokens/s", s.decode_tokens_per_second());
  std::fprintf(stderr, "[%lld prompt tokens, %lld generated in %.2f s, first token after %.2f s, %s, %s%s]\n",
               static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.generated_tokens), s.seconds,
               s.first_token_seconds, rate, o.finish_reason.c_str(), spec);
}

void run_generate(const GenerateArgs& args) {
  torch::NoGradGuard no_grad;
  if (args.num_samples < 1) throw Error("generate: --num-samples must be >= 1");
  const std::string dir = args.model_dir.empty() ? default_model_dir() : args.model_dir;
  model::Transformer model = model::Transformer::load(dir, {parse_weight_dtype(args.dtype), parse_kv_cache_dtype(args.kv_cache_dtype)});
  const model::GenerationConfig generation = model::GenerationConfig::load_or_default(dir, model.config());
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(dir);

  engine::EngineRequest request;
  request.prompt_ids = args.prompt.resolve(tok, dir);
  request.sampling = args.sampling.resolve(generation);
  request.max_tokens = args.max_tokens;
  request.confidence_threshold = args.confidence_threshold;
  if (!args.ignore_eos) request.stop_ids = generation.eos_token_ids;
  // The request contract, against the model's context, before anything is loaded or allocated.
  engine::check_request(request, {model.config().vocab_size, engine::context_limit(model.config(), args.max_context),
                                  tok.has_value()});

  const int64_t concurrency = args.concurrency.value_or(args.num_samples);
  if (concurrency < 1) throw Error("generate: --concurrency must be >= 1");
  const bool speculative = !args.draft_dir.empty() || !args.method.empty();
  const int64_t positions = static_cast<int64_t>(request.prompt_ids.size()) + args.max_tokens;
  const model::WeightDType draft_dtype = resolve_draft_dtype(args.draft_dtype, model);
  std::unique_ptr<draft::Drafter> drafter;
  int64_t gamma = 0;
  if (speculative) {
    drafter = draft::load_drafter(args.method, args.draft_dir, model,
                                  {.max_slots = concurrency, .capacity = drafter_capacity(positions),
                                   .weight_dtype = draft_dtype});
    gamma = resolve_gamma(args.gamma, *drafter);
  }
  // The cut reads a DSpark drafter's confidences; any other drafter would ignore it in silence.
  const auto* dspark = dynamic_cast<const draft::DSparkDrafter*>(drafter.get());
  if (args.confidence_threshold > 0 && !(dspark && dspark->config().confidence_head))
    throw Error("--confidence-threshold cuts a block by its DSpark confidences; " +
                (drafter ? "the " + drafter->method() + " drafter has none" : std::string("there is no drafter (--draft)")));
  const schedule::ScheduleKind kind =
      args.schedule.empty() ? default_schedule(speculative, concurrency) : schedule::parse_schedule_kind(args.schedule);
  if (kind != schedule::ScheduleKind::kNone && !drafter) throw Error("generate: --schedule needs a drafter (--draft)");
  engine::StepCost cost;
  if (schedule::needs_sps_table(kind))
    cost = load_or_profile_step_cost(args.sps_file, model, drafter.get(), dir, args.draft_dir,
                                     draft_dtype, concurrency, gamma);
  engine::Engine engine(model, drafter.get(),
                        {.max_concurrency = concurrency, .max_context = positions, .gamma = gamma, .schedule = kind,
                         .threshold = args.threshold, .step_cost = &cost});

  // One sample streams as text; several print when done.
  const bool stream = !args.json && args.num_samples == 1 && tok.has_value();
  tokenizer::StreamDecoder stream_decoder(tok ? &*tok : nullptr);
  for (int64_t i = 0; i < args.num_samples; ++i) {
    engine::EngineRequest r = request;
    r.sampling.seed = request.sampling.seed + static_cast<uint64_t>(i);
    if (stream)
      r.on_token = [&](int64_t id) {
        for (int32_t known : known_ids(*tok, {id})) std::cout << stream_decoder.push(known) << std::flush;
        return true;
      };
    engine.submit(std::move(r));
  }
  const std::vector<engine::RequestOutcome> outcomes = engine.run();
  if (stream) std::cout << stream_decoder.flush() << std::endl;  // before the stderr summary
  for (size_t i = 0; i < outcomes.size(); ++i) {
    // Several samples as text: a line before each, so one ending without a newline cannot run
    // into the next.
    if (outcomes.size() > 1 && !args.json)
      std::cout << "--- sample " << i << " (seed " << request.sampling.seed + i << ") ---\n";
    print_sample(outcomes[i], tok, args.json, stream, speculative);
  }
  if (speculative && concurrency > 1 && !args.json)
    std::fprintf(stderr, "[engine: %s, concurrency %lld, %lld steps, mean budget %.2f drafts, acceptance length %.2f]\n",
                 schedule::schedule_kind_name(kind).c_str(), static_cast<long long>(concurrency),
                 static_cast<long long>(engine.stats().steps), engine.stats().mean_budget(),
                 engine.stats().acceptance_length());
}

}  // namespace

void register_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text from a prompt");
  cmd->add_option("--model", args->model_dir, "model directory (default: the shipped default model)");
  args->prompt.add_to(cmd);
  cmd->add_option("--max-tokens", args->max_tokens, "new tokens per sample (default 128)");
  cmd->add_option("--max-context", args->max_context,
                  "most prompt + new tokens per request (default and limit: the model's max_position_embeddings)");
  args->sampling.add_to(cmd);
  cmd->add_flag("--ignore-eos", args->ignore_eos, "do not stop at end-of-sequence tokens");
  cmd->add_option("--num-samples", args->num_samples, "independent samples (seeds seed, seed + 1, ...)");
  cmd->add_flag("--json", args->json, "print one JSON object per sample");
  add_dtype_option(cmd, args->dtype);
  add_kv_cache_dtype_option(cmd, args->kv_cache_dtype);
  cmd->add_option("--draft", args->draft_dir, "drafter directory (DeepSpec layout): speculative decoding");
  add_draft_dtype_option(cmd, args->draft_dtype);
  cmd->add_option("--method", args->method, "dspark | dflash | eagle3 | ngram (default: from the drafter's config)");
  cmd->add_option("--gamma", args->gamma, "drafts per step (default: the drafter's block size, else 7)");
  cmd->add_option("--confidence-threshold", args->confidence_threshold,
                  "DSpark: cut each proposal at the first slot whose confidence is below this (0 = off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--concurrency", args->concurrency, "samples in flight at once (default: all of them)");
  cmd->add_option("--schedule", args->schedule,
                  "verification schedule: " + schedule::cli_schedule_names() +
                      " (default with a drafter: dspark-sync for one request in flight, dspark-async for more)");
  cmd->add_option("--threshold", args->threshold, "the threshold schedule's cut on a draft's survival a_j")
      ->capture_default_str()->check(between(0, 1));
  cmd->add_option("--sps", args->sps_file, "step-cost profile from `dspark profile --out` (default: the cached one)");
  cmd->callback([args] { run_generate(*args); });
}

}  // namespace dspark::cli
