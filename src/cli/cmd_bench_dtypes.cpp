// dspark bench dtypes: one checkpoint in several weight dtypes, decode and verify steps timed side
// by side, with each load's time and resident memory.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/dtype_bench.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/kernels/cpu_isa.h"
#include "model/threads.h"

namespace dspark::cli {

namespace {

std::vector<std::string> names(const std::vector<model::WeightDType>& dtypes) {
  std::vector<std::string> out;
  for (model::WeightDType d : dtypes) out.push_back(model::weight_dtype_name(d));
  return out;
}

struct BenchDtypesArgs {
  std::string model_path;
  bool json = false;
  bench::DtypeBenchOptions options;
  std::vector<std::string> dtypes = names(options.dtypes);
  std::vector<std::string> kv_cache_dtypes{"f32"};
};

double mb(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

nlohmann::json to_json(const bench::DtypeBenchResult& r, const bench::DtypeBenchOptions& o) {
  nlohmann::json dtypes = nlohmann::json::array();
  for (size_t i = 0; i < r.dtypes.size(); ++i) {
    const bench::DtypeResult& d = r.dtypes[i];
    nlohmann::json points = nlohmann::json::array();
    for (const bench::ForwardPoint& p : d.points)
      points.push_back({{"B", p.n_new}, {"median_ms", p.median_ms}, {"ratio_to_T1", p.median_ms / d.step_ms(1)},
                        {"runs_ms", p.runs_ms}});
    dtypes.push_back({{"dtype", d.dtype}, {"held", d.held}, {"kv_cache_dtype", d.kv_cache_dtype},
                      {"load_seconds", d.load_seconds},
                      {"weight_bytes", d.weight_bytes}, {"kv_cache_bytes", d.kv_cache_bytes},
                      {"resident_growth_bytes", d.resident_growth}, {"peak_resident_bytes", d.peak_resident},
                      {"decode_speedup", r.decode_speedup[i]}, {"points", points}});
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& [name, why] : r.skipped) skipped.push_back({{"dtype", name}, {"reason", why}});
  return {{"context", o.context}, {"isa", kernels::isa_name()}, {"threads", model::num_threads()},
          {"resident_before_bytes", r.resident_before}, {"dtypes", dtypes}, {"skipped", skipped}};
}

void print_table(const bench::DtypeBenchResult& r, const bench::DtypeBenchOptions& o) {
  std::printf("context %lld, %d threads, %s; speedup: median over rounds of T1(%s, KV %s) / T1(row), timed back to "
              "back\n",
              static_cast<long long>(o.context), model::num_threads(), kernels::isa_name(), r.dtypes.front().dtype.c_str(),
              r.dtypes.front().kv_cache_dtype.c_str());
  std::printf("%-6s %-6s %-4s %8s %10s %10s %10s %10s %9s", "dtype", "held", "kv", "load_s", "weights_MB", "kv_MB",
              "rss_MB", "rss/(w+kv)", "T1_ms");
  for (int64_t b : o.batch_sizes)
    if (b != 1) std::printf(" %10s", ("T" + std::to_string(b) + "/T1").c_str());
  std::printf(" %8s\n", "speedup");
  for (size_t i = 0; i < r.dtypes.size(); ++i) {
    const bench::DtypeResult& d = r.dtypes[i];
    std::printf("%-6s %-6s %-4s %8.2f %10.1f %10.1f %10.1f %10.3f %9.2f", d.dtype.c_str(), d.held.c_str(),
                d.kv_cache_dtype.c_str(), d.load_seconds,
                mb(d.weight_bytes), mb(d.kv_cache_bytes), mb(d.resident_growth),
                static_cast<double>(d.resident_growth) / static_cast<double>(d.weight_bytes + d.kv_cache_bytes),
                d.step_ms(1));
    for (int64_t b : o.batch_sizes)
      if (b != 1) std::printf(" %10.3f", d.step_ms(b) / d.step_ms(1));
    std::printf(" %8.3f\n", r.decode_speedup[i]);
  }
  std::printf("resident before the first load %.1f MB; peak %.1f MB\n", mb(r.resident_before),
              mb(r.dtypes.back().peak_resident));
  for (const auto& [name, why] : r.skipped) std::printf("skipped %s: %s\n", name.c_str(), why.c_str());
}

void run(BenchDtypesArgs& args) {
  args.options.kv_cache_dtypes.clear();
  for (const std::string& name : args.kv_cache_dtypes) args.options.kv_cache_dtypes.push_back(parse_kv_cache_dtype(name, "--kv-cache-dtypes"));
  args.options.dtypes.clear();
  for (const std::string& name : args.dtypes) args.options.dtypes.push_back(parse_weight_dtype(name, "--dtypes"));
  auto progress = [](const std::string& what) { std::fprintf(stderr, "bench dtypes: %s\n", what.c_str()); };
  const bench::DtypeBenchResult result = bench::run_dtype_bench(args.model_path, args.options, progress);
  if (args.json) std::cout << to_json(result, args.options).dump(2) << "\n";
  else print_table(result, args.options);
}

}  // namespace

void register_bench_dtypes(CLI::App& bench) {
  auto args = std::make_shared<BenchDtypesArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "dtypes", "one model in several weight dtypes: decode and verify steps timed side by side, load time and memory");
  cmd->add_option("--model", args->model_path, "model directory or .gguf file")->required();
  cmd->add_option("--dtypes", args->dtypes, "weight dtypes, the first the baseline (auto f32 f16 bf16 q8_0 q4_0)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtypes", args->kv_cache_dtypes,
                  "KV cache dtypes (f32 bf16); every weight dtype runs with each, the first pair the baseline")
      ->capture_default_str();
  cmd->add_option("--context", args->options.context, "cached positions before each step")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--batch-sizes", args->options.batch_sizes, "new tokens B per step (must hold 1)")->capture_default_str()
      ->check(between(1, 4096));
  cmd->add_option("--runs", args->options.runs, "timed rounds (every dtype and B once per round)")->capture_default_str()
      ->check(at_least(1));
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([args] { run(*args); });
}

}  // namespace dspark::cli
