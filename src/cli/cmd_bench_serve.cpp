// dspark bench serve: closed-loop clients over the batched engine for each schedule and
// concurrency (bench/serve_bench.h); a Markdown or JSON table and, with --plot-dir, aggregate
// throughput against tokens/s per user (the paper's Figure 7) and the verification budget against
// concurrency (Figure 8) as SVG files.
//
// With --url it drives an OpenAI-compatible server over HTTP instead (bench/http_serve_bench.h):
// the same prompts, request seeds and aggregate / per-user throughput, plus vLLM's latency
// measures; the in-process flags (model, drafter, schedule) then belong to the server.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "bench/accept_bench.h"
#include "bench/http_serve_report.h"
#include "bench/serve_report.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/json_file.h"
#include "draft/load_drafter.h"
#include "model/config.h"

namespace dspark::cli {
namespace {

namespace fs = std::filesystem;

struct BenchServeArgs {
  std::string target_dir, draft_dir, method, prompts, prompt_format = "turns", schedules = "none,mtp1,dspark-async";
  std::string concurrency = "1,2,4,8,16,32,64", dtype = "auto", draft_dtype = "auto", kv_cache_dtype = "f32", sps_file, plot_dir, json_out, step_log;
  int64_t limit = 64;
  int64_t repeats = 3;
  bool json = false;
  bool ignore_eos = false;
  std::optional<int64_t> top_k;  // in-process: 0 (off) unless given; --url: sent only when given
  std::optional<double> top_p;
  bench::ServeOptions options;
  // --url mode: the server and its load.
  bench::HttpEndpoint endpoint;
  std::string endpoint_kind = "chat", model_name, max_concurrency, request_rates = "inf";
  std::vector<std::string> goodput;
  int64_t num_prompts = 0;
};

// The table on stdout (JSON with --json, else Markdown) and the JSON also in --json-out.
void emit_report(const BenchServeArgs& a, const nlohmann::json& json, const std::string& markdown) {
  std::cout << (a.json ? json.dump(2) + "\n" : markdown);
  if (!a.json_out.empty()) write_json_file(a.json_out, json);
}

void run_bench_serve(const BenchServeArgs& a) {
  torch::NoGradGuard no_grad;
  if (a.prompts.empty()) throw Error("bench serve: --prompts is required");
  const std::string dir = a.target_dir.empty() ? default_model_dir() : a.target_dir;
  model::Transformer target = model::Transformer::load(dir, {parse_weight_dtype(a.dtype), parse_kv_cache_dtype(a.kv_cache_dtype)});
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(fs::path(dir));
  const std::vector<std::vector<int64_t>> prompts =
      bench::chat_prompt_ids(dir, tok, bench::read_prompts(a.prompts, a.prompt_format, a.limit));
  std::vector<schedule::ScheduleKind> kinds;
  for (const std::string& s : split_csv(a.schedules)) kinds.push_back(schedule::parse_schedule_kind(s));
  const std::vector<int64_t> levels = parse_ids(a.concurrency, "--concurrency");
  const int64_t max_c = *std::max_element(levels.begin(), levels.end());
  if (*std::min_element(levels.begin(), levels.end()) < 1) throw Error("bench serve: --concurrency values must be >= 1");

  bench::ServeOptions o = a.options;
  if (a.top_k) o.sampling.top_k = *a.top_k;
  if (a.top_p) o.sampling.top_p = *a.top_p;
  if (!a.ignore_eos) o.stop_ids = model::GenerationConfig::load_or_default(dir, target.config()).eos_token_ids;
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  std::unique_ptr<draft::Drafter> drafter;
  const model::WeightDType draft_dtype = resolve_draft_dtype(a.draft_dtype, target);
  if (!a.draft_dir.empty() || !a.method.empty()) {
    drafter = draft::load_drafter(a.method, a.draft_dir, target,
                                  {.max_slots = max_c, .capacity = drafter_capacity(longest + o.max_tokens),
                                   .weight_dtype = draft_dtype});
    o.gamma = resolve_gamma(o.gamma, *drafter);
  }
  // Profiled at this workload's typical context: a step's cost grows with the positions it attends to.
  // Only the dspark schedules plan with it; for the others it would only fill the cost-model column,
  // not worth a profile's minutes (--sps FILE gives that column anyway).
  const bool needs_profile = std::any_of(kinds.begin(), kinds.end(), schedule::needs_sps_table);
  engine::StepCost cost;
  if (needs_profile || !a.sps_file.empty())
    cost = load_or_profile_step_cost(a.sps_file, target, drafter.get(), dir, a.draft_dir,
                                     draft_dtype, max_c, o.gamma,
                                     engine::typical_context(prompts, o.max_tokens));
  else
    std::fprintf(stderr, "bench serve: no schedule here plans with the step-cost profile; not measuring one "
                         "(the cost-model column stays empty; --sps FILE fills it)\n");
  std::ofstream step_log;
  if (!a.step_log.empty()) {
    step_log.open(a.step_log);
    if (!step_log) throw Error(a.step_log + ": cannot write");
    o.on_step = [&step_log](const std::string& schedule, int64_t concurrency, const engine::StepTiming& t) {
      step_log << nlohmann::json{{"schedule", schedule},
                                 {"concurrency", concurrency},
                                 {"drafting_requests", t.drafting_requests},
                                 {"verify_tokens", t.verify_tokens},
                                 {"prefill_tokens", t.prefill_tokens},
                                 {"draft_seconds", t.draft_seconds},
                                 {"seconds", t.seconds},
                                 {"requests", t.requests},
                                 {"predicted_seconds", t.predicted_seconds},
                                 {"profile_seconds", t.profile_seconds}}
                      .dump()
               << "\n";
    };
  }

  const std::vector<bench::ServePoint> points =
      bench::run_serve_sweep(target, drafter.get(), cost, kinds, levels, prompts, o, a.repeats, [](const bench::ServePoint& p, int64_t rep) {
        std::fprintf(stderr, "%s C=%ld run %ld: %.1f tok/s aggregate, %.1f tok/s/user, budget %.2f, acceptance %.2f\n",
                     p.schedule.c_str(), static_cast<long>(p.concurrency), static_cast<long>(rep + 1), p.aggregate_tps,
                     p.user_tps_mean, p.mean_budget, p.acceptance_length);
      });
  nlohmann::json json = nlohmann::json::array();
  for (const auto& p : points) json.push_back(bench::to_json(p));
  emit_report(a, json, bench::serve_markdown(points));
  if (!a.plot_dir.empty()) bench::write_serve_plots(a.plot_dir, points);
}

// "1,2.5,inf" -> {1, 2.5, inf}: request rates, each > 0.
std::vector<double> parse_rates(const std::string& csv) {
  std::vector<double> rates;
  for (const std::string& item : split_csv(csv)) {
    const std::optional<double> rate = parse_number(item);
    if (!rate || !(*rate > 0)) throw Error("--request-rate: '" + item + "' is not a rate > 0 or inf");
    rates.push_back(*rate);
  }
  if (rates.empty()) throw Error("--request-rate: no rate given");
  return rates;
}

// Requests per point: --num-prompts, else as the in-process benchmark (max(min, C x per-client)),
// else (no cap on concurrency) one per prompt.
int64_t requests_per_point(const BenchServeArgs& a, int64_t cap, size_t n_prompts) {
  if (a.num_prompts > 0) return a.num_prompts;
  if (cap > 0) return std::max(a.options.min_requests, cap * a.options.requests_per_client);
  return static_cast<int64_t>(n_prompts);
}

void run_bench_serve_url(const BenchServeArgs& a) {
  const std::vector<std::string> prompts = bench::read_prompts(a.prompts, a.prompt_format, a.limit);
  const bench::Slo slo = bench::parse_goodput(a.goodput);
  const std::vector<double> rates = parse_rates(a.request_rates);
  std::vector<int64_t> caps = a.max_concurrency.empty() ? std::vector<int64_t>{0}
                                                        : parse_ids(a.max_concurrency, "--max-concurrency");
  if (*std::min_element(caps.begin(), caps.end()) < 1 && !a.max_concurrency.empty())
    throw Error("bench serve: --max-concurrency values must be >= 1");

  const bench::ServerInfo info = bench::fetch_server_info(a.endpoint, a.model_name);
  const bench::HttpRequestOptions request{.endpoint = a.endpoint_kind, .model = info.model,
                                          .max_tokens = a.options.max_tokens,
                                          .temperature = a.options.sampling.temperature,
                                          .top_k = a.top_k, .top_p = a.top_p,
                                          .seed = a.options.sampling.seed, .ignore_eos = a.ignore_eos};
  bench::check_one_request(a.endpoint, request, prompts.front());
  const std::string label = info.schedule.empty() ? "http" : info.schedule;
  std::vector<bench::HttpPoint> points;
  for (int64_t cap : caps)
    for (double rate : rates) {
      const bench::HttpLoad load{.max_concurrency = cap, .request_rate = rate,
                                 .num_requests = requests_per_point(a, cap, prompts.size()),
                                 .seed = a.options.sampling.seed};
      const bench::HttpRun run = bench::run_http_load(a.endpoint, request, prompts, load);
      points.push_back(bench::make_http_point(label, a.endpoint, request, load, slo, run));
      const bench::HttpSummary& s = points.back().summary;
      std::fprintf(stderr, "%s C=%s rate=%g: %.1f tok/s aggregate, %.1f tok/s/user, TTFT p50 %.1f ms, %ld failed\n",
                   label.c_str(), cap > 0 ? std::to_string(cap).c_str() : "inf", rate, s.output_throughput, s.user_tps_mean,
                   s.ttft.median_ms, static_cast<long>(s.failed));
    }
  nlohmann::json json = nlohmann::json::array();
  for (const auto& p : points) json.push_back(bench::to_json(p));
  emit_report(a, json, bench::http_markdown(points));
  if (!a.plot_dir.empty()) bench::write_http_plots(a.plot_dir, points);
}

// The --url flags; each in-process-only flag is refused beside --url (it belongs to the server).
void add_url_options(CLI::App* cmd, BenchServeArgs& a, const std::vector<CLI::Option*>& in_process_only) {
  CLI::Option* url = cmd->add_option("--url", a.endpoint.url, "drive an OpenAI-compatible server at http://HOST:PORT (or its OpenAI base URL, http://HOST:PORT/v1)");
  for (CLI::Option* o : in_process_only) url->excludes(o);
  const std::vector<CLI::Option*> url_only = {
      cmd->add_option("--endpoint", a.endpoint_kind, "chat (/v1/chat/completions) | completions (/v1/completions)")
          ->check(CLI::IsMember({"chat", "completions"}))->capture_default_str(),
      cmd->add_option("--model-name", a.model_name, "the requests' model (default: /v1/models data[0].id)"),
      cmd->add_option("--max-concurrency", a.max_concurrency,
                      "comma-separated caps on requests in flight, a point each (default: no cap)"),
      cmd->add_option("--request-rate", a.request_rates, "comma-separated Poisson arrival rates per second, or inf")
          ->capture_default_str(),
      cmd->add_option("--num-prompts", a.num_prompts,
                      "requests per point (default: max(32, C x requests-per-client), or one per prompt)"),
      cmd->add_option("--goodput", a.goodput, "SLOs for goodput: ttft:MS tpot:MS e2el:MS")->expected(1, 3),
      cmd->add_option("--api-key", a.endpoint.api_key, "sent as Authorization: Bearer KEY"),
      cmd->add_option("--timeout", a.endpoint.timeout_s, "seconds per request")->capture_default_str(),
  };
  for (CLI::Option* o : url_only) o->needs(url);
}

}  // namespace

void register_bench_serve(CLI::App& bench) {
  auto a = std::make_shared<BenchServeArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "serve", "serving benchmark: closed-loop clients over schedules and concurrencies, or a server with --url");
  std::vector<CLI::Option*> in_process_only = {
      cmd->add_option("--target", a->target_dir, "target model directory (default: the shipped default model)"),
      cmd->add_option("--draft", a->draft_dir, "drafter directory"),
      cmd->add_option("--method", a->method, "dspark | dflash | eagle3 | ngram (default: from the drafter's config)"),
      cmd->add_option("--schedule", a->schedules, "comma-separated, of: " + schedule::cli_schedule_names())
          ->capture_default_str(),
      cmd->add_option("--concurrency", a->concurrency, "comma-separated client counts")->capture_default_str(),
  };
  cmd->add_option("--prompts", a->prompts, "prompt file (JSONL)")->required();
  cmd->add_option("--prompt-format", a->prompt_format, "turns | instruction")->capture_default_str();
  cmd->add_option("--limit", a->limit, "prompts read from the file")->capture_default_str();
  cmd->add_option("--max-tokens", a->options.max_tokens, "new tokens per request")->capture_default_str();
  cmd->add_option("--temperature", a->options.sampling.temperature, "sampling temperature")->capture_default_str();
  cmd->add_option("--seed", a->options.sampling.seed, "request i samples with seed + i")->capture_default_str()->check(at_least(0));
  cmd->add_option("--top-k", a->top_k, "top-k (in-process default 0, off; --url: the server's default unless given)");
  cmd->add_option("--top-p", a->top_p, "top-p (in-process default 1, off; --url: the server's default unless given)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "generate --max-tokens tokens whatever the model says");
  in_process_only.push_back(
      cmd->add_option("--gamma", a->options.gamma, "drafts per request per step")->capture_default_str());
  in_process_only.push_back(
      cmd->add_option("--threshold", a->options.threshold, "the threshold schedule's cut on a draft's survival a_j")
          ->capture_default_str()->check(between(0, 1)));
  cmd->add_option("--requests-per-client", a->options.requests_per_client, "requests per point = max(32, concurrency x this)")
      ->capture_default_str();
  in_process_only.push_back(
      cmd->add_option("--repeats", a->repeats, "runs per point (median reported); schedules alternate within each")
          ->capture_default_str());
  in_process_only.push_back(
      cmd->add_option("--sps", a->sps_file, "step-cost profile from `dspark profile --out` (default: the cached one)"));
  in_process_only.push_back(cmd->add_flag("--fixed-profile", a->options.fixed_profile,
                                          "plan with the step-cost profile as measured; by default the engine "
                                          "rescales it by its steps' own times (docs/engine.md)"));
  in_process_only.push_back(add_dtype_option(cmd, a->dtype));
  in_process_only.push_back(add_draft_dtype_option(cmd, a->draft_dtype));
  in_process_only.push_back(add_kv_cache_dtype_option(cmd, a->kv_cache_dtype));
  in_process_only.push_back(cmd->add_option(
      "--step-log", a->step_log, "write every engine step's measured and predicted time here (JSON lines)"));
  add_url_options(cmd, *a, in_process_only);
  cmd->add_option("--plot-dir", a->plot_dir,
                  "write serve_throughput.svg and serve_budget.svg here (with --url also serve_latency.svg)")
      ->check(writable_dir());
  cmd->add_option("--json-out", a->json_out, "also write the JSON table to this file")
      ->check(writable_file());
  cmd->add_flag("--json", a->json, "print JSON instead of Markdown");
  cmd->callback([a] { a->endpoint.url.empty() ? run_bench_serve(*a) : run_bench_serve_url(*a); });
}

}  // namespace dspark::cli
