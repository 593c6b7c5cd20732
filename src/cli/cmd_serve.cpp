// dspark serve: the OpenAI-compatible HTTP server (serve/http_server.h) over the engine. It listens
// first (GET /health answers 503 while the model loads), then loads the target, the drafter and the
// step-cost profile, and serves until SIGTERM or SIGINT: new requests are then refused, running ones
// get --timeout seconds to finish, the rest are cancelled, and it exits 0.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "draft/load_drafter.h"
#include "model/threads.h"
#include "serve/engine_service.h"
#include "serve/http_server.h"

namespace dspark::cli {

namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::string model_dir, draft_dir, method, schedule, sps_file, dtype = "auto", draft_dtype = "auto", kv_cache_dtype = "f32";
  std::optional<int64_t> gamma, http_threads;
  std::optional<int> threads;
  int64_t max_concurrency = 16, max_queue = 64, max_context = 0;
  double timeout_seconds = 60, threshold = 0.5;
  serve::HttpOptions http;
};

volatile std::sig_atomic_t stop_signal = 0;

void on_stop_signal(int signal) { stop_signal = signal; }

void install_signal_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a dead server
}

// The model's name as clients send it: its directory's (or GGUF file's) name, links resolved so
// models/default serves as the model it points to.
std::string model_id(const std::string& dir) {
  const fs::path p = fs::weakly_canonical(dir);
  return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

// --draft: "none" turns speculation off; unset, the dspark drafter shipped beside the model
// (models/NAME-dspark), if there is one.
std::string resolve_draft_dir(const std::string& flag, const std::string& method, const std::string& model_dir) {
  if (flag == "none" || (flag.empty() && method == "ngram")) return "";
  if (!flag.empty()) return flag;
  const fs::path beside = fs::weakly_canonical(model_dir).string() + "-dspark";
  return fs::is_directory(beside) ? beside.string() : "";
}

std::optional<tokenizer::ChatTemplate> chat_template_if_any(const std::string& dir) {
  try {
    return tokenizer::ChatTemplate::load(dir);
  } catch (const Error& e) {
    std::fprintf(stderr, "dspark serve: no chat template (%s); /v1/chat/completions will refuse requests\n", e.what());
    return std::nullopt;
  }
}

void wait_for_stop_signal() {
  while (!stop_signal) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

void run_serve(ServeArgs& a) {
  torch::NoGradGuard no_grad;
  install_signal_handlers();
  if (a.max_concurrency < 1 || a.max_queue < 0) throw Error("serve: --max-concurrency must be >= 1, --max-queue >= 0");
  if (a.timeout_seconds <= 0) throw Error("serve: --timeout must be > 0");
  a.http.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_seconds * 1000));
  // A streaming request holds its connection's thread; room for every running and waiting request,
  // and a few for /health, /metrics and the dashboard.
  a.http.threads = a.http_threads.value_or(a.max_concurrency + a.max_queue + 8);
  if (a.threads) model::set_num_threads(*a.threads);
  serve::HttpServer server(a.http);
  std::printf("dspark serve: listening on http://%s:%d\n", a.http.host.c_str(), server.port());
  std::fflush(stdout);

  const std::string dir = a.model_dir.empty() ? default_model_dir() : a.model_dir;
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype), parse_kv_cache_dtype(a.kv_cache_dtype)});
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(dir);
  if (!tok) throw Error(dir + ": no tokenizer; the server needs one");
  const int64_t context = engine::context_limit(target.config(), a.max_context);
  const std::string draft_dir = resolve_draft_dir(a.draft_dir, a.method, dir);
  const model::WeightDType draft_dtype = resolve_draft_dtype(a.draft_dtype, target);
  std::unique_ptr<draft::Drafter> drafter;
  int64_t gamma = 0;
  if (!draft_dir.empty() || !a.method.empty()) {
    drafter = draft::load_drafter(a.method, draft_dir, target,
                                  {.max_slots = a.max_concurrency, .capacity = drafter_capacity(context),
                                   .weight_dtype = draft_dtype});
    gamma = resolve_gamma(a.gamma, *drafter);
  }
  const schedule::ScheduleKind kind = a.schedule.empty()
                                          ? (drafter ? schedule::ScheduleKind::kDsparkAsync : schedule::ScheduleKind::kNone)
                                          : schedule::parse_schedule_kind(a.schedule);
  if (kind != schedule::ScheduleKind::kNone && !drafter) throw Error("serve: --schedule needs a drafter (--draft)");
  engine::StepCost cost;
  if (schedule::needs_sps_table(kind))
    cost = load_or_profile_step_cost(a.sps_file, target, drafter.get(), dir, draft_dir,
                                     draft_dtype, a.max_concurrency, gamma);

  const std::string id = model_id(dir);
  serve::ServerMetrics metrics({.model = id,
                                .drafter = draft_dir.empty() ? a.method : model_id(draft_dir),
                                .schedule = schedule::schedule_kind_name(kind),
                                .gamma = gamma,
                                .max_concurrency = a.max_concurrency});
  const tokenizer::Tokenizer& t = *tok;
  serve::EngineService service(target, drafter.get(),
                               {.max_concurrency = a.max_concurrency,
                                .max_context = context,
                                .gamma = gamma,
                                .schedule = kind,
                                .threshold = a.threshold,
                                .step_cost = &cost,
                                .rescale_step_cost = true,
                                .detokenize = [&t](const std::vector<int64_t>& ids) { return t.decode(known_ids(t, ids)); }},
                               a.max_queue, metrics);
  const serve::Backend backend{.model_id = id,
                               .model_root = fs::weakly_canonical(dir).string(),
                               .tokenizer = &t,
                               .chat_template = chat_template_if_any(dir),
                               .generation = model::GenerationConfig::load_or_default(dir, target.config()),
                               .context_limit = context,
                               .speculative = drafter != nullptr,
                               .service = &service,
                               .metrics = &metrics};
  server.set_backend(&backend);
  std::fprintf(stderr, "dspark serve: serving %s (context %lld) with %s, schedule %s, %lld requests at once\n",
               backend.model_id.c_str(), static_cast<long long>(context),
               drafter ? ("drafter " + metrics.info().drafter + ", gamma " + std::to_string(gamma)).c_str() : "no drafter",
               metrics.info().schedule.c_str(), static_cast<long long>(a.max_concurrency));

  wait_for_stop_signal();
  std::fprintf(stderr, "dspark serve: signal %d: finishing the requests in flight (up to %.0f s)\n",
               static_cast<int>(stop_signal), a.timeout_seconds);
  server.stop_accepting();
  const int64_t cancelled = service.drain(a.http.timeout);
  server.stop();
  std::fprintf(stderr, "dspark serve: stopped (%lld requests cancelled)\n", static_cast<long long>(cancelled));
}

}  // namespace

void register_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat and completions, metrics, dashboard)");
  cmd->add_option("--model", a->model_dir, "model directory or .gguf file (default: the shipped default model)");
  cmd->add_option("--draft", a->draft_dir,
                  "drafter directory; `none` for no speculation (default: the dspark drafter beside the model, "
                  "MODEL-dspark, if present)");
  cmd->add_option("--method", a->method, "dspark | dflash | eagle3 | ngram (default: from the drafter's config)");
  cmd->add_option("--schedule", a->schedule,
                  "verification schedule: " + schedule::cli_schedule_names() + " (default: dspark-async with a drafter)");
  cmd->add_option("--gamma", a->gamma, "drafts per request per step (default: the drafter's block size)");
  cmd->add_option("--threshold", a->threshold, "the threshold schedule's cut on a draft's survival a_j")
      ->capture_default_str()->check(between(0, 1));
  cmd->add_option("--sps", a->sps_file, "step-cost profile from `dspark profile --out` (default: the cached one)");
  cmd->add_option("--host", a->http.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a->http.port, "port (0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", a->http.api_key, "require 'Authorization: Bearer KEY' (GET /health and / stay open)");
  cmd->add_option("--max-concurrency", a->max_concurrency, "requests decoding at once (KV slots)")->capture_default_str();
  cmd->add_option("--max-queue", a->max_queue, "requests waiting beyond those; more get 503")->capture_default_str();
  cmd->add_option("--max-context", a->max_context,
                  "most prompt + output tokens per request (default and limit: the model's max_position_embeddings)");
  cmd->add_option("--max-body-bytes", a->http.max_body_bytes, "largest request body (413 beyond)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 34));
  cmd->add_option("--timeout", a->timeout_seconds,
                  "seconds: to read a request, per write, and to finish the requests in flight at SIGTERM")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads for the model (default: all cores; same as dspark --threads)");
  cmd->add_option("--threads-http", a->http_threads,
                  "connections served at once (default: max-concurrency + max-queue + 8)");
  add_dtype_option(cmd, a->dtype);
  add_draft_dtype_option(cmd, a->draft_dtype);
  add_kv_cache_dtype_option(cmd, a->kv_cache_dtype);
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace dspark::cli
