// dspark bench forward: SPS(B) table and AR decode speed of a model.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "bench/forward_bench.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/blas_check.h"
#include "model/threads.h"
#include "model/kernels/cpu_isa.h"

namespace dspark::cli {

namespace {

struct BenchForwardArgs {
  std::string model_dir, dtype = "auto", kv_cache_dtype = "f32";
  bool json = false;
  bench::ForwardBenchOptions options;
};

nlohmann::json to_json(const bench::ForwardBenchResult& r, const model::Transformer& model, const std::string& dtype) {
  nlohmann::json points = nlohmann::json::array();
  for (const bench::ForwardPoint& p : r.points)
    points.push_back({{"shape", p.shape}, {"context", p.context}, {"B", p.n_new}, {"median_ms", p.median_ms},
                      {"steps_per_s", p.steps_per_s}, {"runs_ms", p.runs_ms}});
  nlohmann::json prefills = nlohmann::json::array();
  for (const bench::PrefillPoint& p : r.prefills)
    prefills.push_back({{"context", p.context}, {"median_ms", p.median_ms}, {"tokens_per_s", p.tokens_per_s},
                        {"runs_ms", p.runs_ms}});
  return {{"weight_dtype", dtype}, {"weight_bytes", r.weight_bytes}, {"isa", kernels::isa_name()},
          {"blas", model::detect_blas().library}, {"threads", model::num_threads()},
          {"decode_step_ms", r.decode_step_ms}, {"weight_gb_per_s", r.weight_gb_per_s},
          {"decode_tokens_per_s", r.decode_tokens_per_s}, {"points", points}, {"prefill", prefills}, {"skipped", r.skipped},
          {"n_layers", model.config().n_layers}, {"hidden_size", model.config().hidden_size}};
}

void print_table(const bench::ForwardBenchResult& r) {
  std::printf("%-8s %8s %5s %10s %10s %12s\n", "shape", "context", "B", "median_ms", "SPS(B)", "T(B)/T(1)");
  for (const bench::ForwardPoint& p : r.points) {
    double t1 = 0;
    for (const bench::ForwardPoint& q : r.points)
      if (q.shape == "one_seq" && q.context == p.context && q.n_new == 1) t1 = q.median_ms;
    std::printf("%-8s %8lld %5lld %10.2f %10.2f %12.3f\n", p.shape.c_str(), static_cast<long long>(p.context),
                static_cast<long long>(p.n_new), p.median_ms, p.steps_per_s, p.median_ms / t1);
  }
  for (const bench::PrefillPoint& p : r.prefills)
    std::printf("prefill of %lld tokens: %.1f ms (%.1f tokens/s)\n", static_cast<long long>(p.context), p.median_ms,
                p.tokens_per_s);
  std::printf("decode step %.2f ms (%.1f GB/s of weights), AR decode %.2f tokens/s\n", r.decode_step_ms,
              r.weight_gb_per_s, r.decode_tokens_per_s);
  for (const std::string& s : r.skipped) std::printf("skipped: %s\n", s.c_str());
}

void run(const BenchForwardArgs& args) {
  model::Transformer model = model::Transformer::load(args.model_dir, {parse_weight_dtype(args.dtype), parse_kv_cache_dtype(args.kv_cache_dtype)});
  auto progress = [&](const std::string& what) { std::fprintf(stderr, "bench forward: %s\n", what.c_str()); };
  const bench::ForwardBenchResult result = bench::run_forward_bench(model, args.options, progress);
  if (args.json) std::cout << to_json(result, model, model::weight_dtype_name(model.weight_dtype())).dump(2) << "\n";
  else print_table(result);
}

}  // namespace

void register_bench_forward(CLI::App& bench) {
  auto args = std::make_shared<BenchForwardArgs>();
  CLI::App* cmd = bench.add_subcommand("forward", "forward cost against new tokens B (SPS table), prefill and AR decode speed");
  cmd->add_option("--model", args->model_dir, "model directory")->required();
  add_dtype_option(cmd, args->dtype);
  add_kv_cache_dtype_option(cmd, args->kv_cache_dtype);
  cmd->add_option("--contexts", args->options.contexts, "context lengths (default 256 1024)")
      ->check(at_least(1));
  cmd->add_option("--batch-sizes", args->options.batch_sizes, "B values (default 1 2 4 8 16 32 64)")
      ->check(between(1, 4096));
  cmd->add_option("--runs", args->options.runs, "timed runs per point (median reported, default 7)")
      ->check(at_least(1));
  cmd->add_option("--prefill-runs", args->options.prefill_runs, "timed prefills per context (median reported, default 3)")
      ->check(at_least(1));
  cmd->add_option("--max-kv-gib", args->options.max_kv_gib, "skip batch points whose KV cache exceeds this")
      ->check(above(0));
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([args] { run(*args); });
}

}  // namespace dspark::cli
