// dspark bench kernels: a step's linear layers, LM head and attention timed alone, per B.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "bench/kernel_bench.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/kernels/cpu_isa.h"
#include "model/threads.h"

namespace dspark::cli {

namespace {

struct BenchKernelsArgs {
  std::string model_dir, dtype = "auto", kv_cache_dtype = "f32";
  bool json = false;
  bench::KernelBenchOptions options;
};

void print_table(const bench::KernelBenchResult& r, const bench::KernelBenchOptions& o,
                 model::KvCacheDType kv_cache_dtype) {
  std::printf("context %lld, KV read per step %.1f MB (%s)\n", static_cast<long long>(o.context),
              r.kv_bytes_per_step / 1e6, model::kv_cache_dtype_name(kv_cache_dtype));
  std::printf("%5s %12s %12s %14s %18s\n", "B", "linears_ms", "lm_head_ms", "attention_ms", "attention_hot_ms");
  for (const bench::KernelPoint& p : r.points)
    std::printf("%5lld %12.2f %12.2f %14.2f %18.2f\n", static_cast<long long>(p.n_new), p.linears_ms, p.lm_head_ms,
                p.attention_ms, p.attention_hot_ms);
}

void run(const BenchKernelsArgs& args) {
  const model::Transformer model = model::Transformer::load(args.model_dir, {parse_weight_dtype(args.dtype), parse_kv_cache_dtype(args.kv_cache_dtype)});
  auto progress = [](const std::string& what) { std::fprintf(stderr, "bench kernels: %s\n", what.c_str()); };
  const bench::KernelBenchResult r = bench::run_kernel_bench(model, args.options, progress);
  if (!args.json) return print_table(r, args.options, model.kv_cache_dtype());
  nlohmann::json points = nlohmann::json::array();
  for (const bench::KernelPoint& p : r.points)
    points.push_back({{"B", p.n_new}, {"linears_ms", p.linears_ms}, {"lm_head_ms", p.lm_head_ms},
                      {"attention_ms", p.attention_ms}, {"attention_hot_ms", p.attention_hot_ms}});
  std::cout << nlohmann::json{{"weight_dtype", model::weight_dtype_name(model.weight_dtype())},
                              {"isa", kernels::isa_name()}, {"threads", model::num_threads()},
                              {"context", args.options.context}, {"kv_cache_dtype", model::kv_cache_dtype_name(model.kv_cache_dtype())},
                              {"kv_bytes_per_step", r.kv_bytes_per_step},
                              {"points", points}}
                   .dump(2)
            << "\n";
}

}  // namespace

void register_bench_kernels(CLI::App& bench) {
  auto args = std::make_shared<BenchKernelsArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "kernels", "a step's linear layers, LM head and attention (cold and hot KV cache) timed alone per B");
  cmd->add_option("--model", args->model_dir, "model directory or .gguf file")->required();
  add_dtype_option(cmd, args->dtype);
  add_kv_cache_dtype_option(cmd, args->kv_cache_dtype);
  cmd->add_option("--context", args->options.context, "cached positions attention reads")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--batch-sizes", args->options.batch_sizes, "new tokens B of the one sequence")->capture_default_str()
      ->check(between(1, 4096));
  cmd->add_option("--runs", args->options.runs, "timed rounds (every part and B once per round)")->capture_default_str()
      ->check(at_least(1));
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([args] { run(*args); });
}

}  // namespace dspark::cli
