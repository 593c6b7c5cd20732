// `dspark bench dtypes`: one checkpoint held in several weight dtypes in one process, their decode
// step T(1) and verify steps T(B) timed side by side (every round times every dtype, so a shared
// machine's drift falls on all of them alike), with what each load took in time and resident memory.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/forward_bench.h"
#include "model/transformer.h"

namespace dspark::bench {

struct DtypeBenchOptions {
  // The first is the baseline of the speedups.
  std::vector<model::WeightDType> dtypes{model::WeightDType::kBF16, model::WeightDType::kQ8_0, model::WeightDType::kQ4_0};
  // Each weight dtype runs once per KV cache dtype (weight dtype outermost); the first pair is
  // the baseline.
  std::vector<model::KvCacheDType> kv_cache_dtypes{model::KvCacheDType::kF32};
  int64_t context = 1024;
  std::vector<int64_t> batch_sizes{1, 8};  // one sequence with B new tokens; must hold 1
  int64_t warmup = 2;
  int64_t runs = 9;
  uint64_t seed = 0;
};

struct DtypeResult {
  std::string dtype;                // as asked (--dtype's name)
  std::string held;                 // what the model holds (auto resolved)
  std::string kv_cache_dtype;       // its cache's element type
  double load_seconds = 0;
  int64_t weight_bytes = 0;         // the model's weights (Transformer::weight_bytes)
  int64_t kv_cache_bytes = 0;       // the cache the points run in
  int64_t resident_growth = 0;      // resident bytes after load and the cache's allocation, minus before
  int64_t peak_resident = 0;        // the process's peak so far, after this load
  std::vector<ForwardPoint> points;  // one_seq at options.context, one per B
  const ForwardPoint& point(int64_t b) const;  // the point of B new tokens
  double step_ms(int64_t b) const { return point(b).median_ms; }
};

struct DtypeBenchResult {
  std::vector<DtypeResult> dtypes;
  int64_t resident_before = 0;  // before the first load
  // Per contender: the median over rounds of T_baseline(1) / T_dtype(1) (each round's pair timed back
  // to back), so the speedup is measured side by side rather than from two medians.
  std::vector<double> decode_speedup;
  // The weight / KV cache dtypes that did not load, each with the reason (a Q8_0 GGUF file asked
  // for q4_0, say), in the order asked.
  std::vector<std::pair<std::string, std::string>> skipped;
};

DtypeBenchResult run_dtype_bench(const std::string& model_path, const DtypeBenchOptions& options,
                                 const std::function<void(const std::string&)>& progress = {});

}  // namespace dspark::bench
