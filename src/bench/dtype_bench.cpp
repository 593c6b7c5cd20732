#include "bench/dtype_bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "bench/median.h"
#include "common/error.h"
#include "common/process_memory.h"
#include "model/kv_cache.h"

namespace dspark::bench {

namespace {

// One dtype's model, its cache (one slot prefilled with `context` random tokens) and its points.
struct Contender {
  model::Transformer model;
  model::KvCache cache;
  std::vector<PointRunner> points;
  DtypeResult result;
};

Contender load_contender(const std::string& path, model::WeightDType dtype, model::KvCacheDType kv_dtype,
                         const DtypeBenchOptions& o, int64_t max_b) {
  const int64_t before = resident_bytes();
  const auto start = std::chrono::steady_clock::now();
  model::Transformer model = model::Transformer::load(path, {.weight_dtype = dtype, .kv_cache_dtype = kv_dtype});
  model.config().check_positions(o.context + max_b, "bench dtypes: --context " + std::to_string(o.context) + " plus " +
                                                        std::to_string(max_b) + " new tokens");
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  model::KvCache cache = model.make_cache(1, o.context + max_b);
  const int64_t after = resident_bytes();  // after load, with the cache: before any forward's buffers
  Contender c{std::move(model), std::move(cache), {}, {}};
  const int64_t slot = *c.cache.allocate();
  std::mt19937_64 rng(o.seed);  // every dtype sees the same context and the same new tokens
  {
    torch::NoGradGuard no_grad;
    c.model.prefill(c.cache, slot, random_ids(o.context, c.model.config().vocab_size, rng));
  }
  for (int64_t b : o.batch_sizes) c.points.push_back(make_point(c.model.config(), {slot}, o.context, 1, b, rng));
  c.result.dtype = model::weight_dtype_name(dtype);
  c.result.held = model::weight_dtype_name(c.model.weight_dtype());
  c.result.kv_cache_dtype = model::kv_cache_dtype_name(kv_dtype);
  c.result.load_seconds = load_seconds;
  c.result.weight_bytes = c.model.weight_bytes();
  for (int64_t l = 0; l < c.model.config().n_layers; ++l)
    c.result.kv_cache_bytes += static_cast<int64_t>(c.cache.keys(l).nbytes() + c.cache.values(l).nbytes());
  c.result.resident_growth = after - before;
  c.result.peak_resident = peak_resident_bytes();
  return c;
}

}  // namespace

const ForwardPoint& DtypeResult::point(int64_t b) const {
  for (const ForwardPoint& p : points)
    if (p.n_new == b) return p;
  throw Error("bench dtypes: no point B=" + std::to_string(b));
}

DtypeBenchResult run_dtype_bench(const std::string& model_path, const DtypeBenchOptions& o,
                                 const std::function<void(const std::string&)>& progress) {
  if (o.dtypes.empty()) throw Error("bench dtypes: no dtypes given");
  if (o.kv_cache_dtypes.empty()) throw Error("bench dtypes: no KV cache dtypes given");
  if (std::find(o.batch_sizes.begin(), o.batch_sizes.end(), 1) == o.batch_sizes.end())
    throw Error("bench dtypes: --batch-sizes must hold 1 (the decode step every ratio is taken against)");
  const int64_t max_b = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  DtypeBenchResult result;
  result.resident_before = resident_bytes();
  std::vector<Contender> contenders;
  for (model::WeightDType dtype : o.dtypes) {
    for (model::KvCacheDType kv_dtype : o.kv_cache_dtypes) {
      const std::string name = std::string(model::weight_dtype_name(dtype)) + ", KV cache " + model::kv_cache_dtype_name(kv_dtype);
      if (progress) progress("loading " + model_path + " as " + name);
      // A dtype the file refuses (a Q8_0 GGUF file asked for q4_0: its blocks are not quantized
      // again) is left out of the table, said so, rather than ending the run; a file no dtype
      // loads is the error it is.
      try {
        contenders.push_back(load_contender(model_path, dtype, kv_dtype, o, max_b));
      } catch (const Error& e) {
        result.skipped.push_back({name, e.what()});
        if (progress) progress("skipping " + name + ": " + e.what());
      }
    }
  }
  if (contenders.empty()) {
    std::string reasons;
    for (const auto& [name, why] : result.skipped) reasons += (reasons.empty() ? "" : "; ") + name + ": " + why;
    throw Error("bench dtypes: no dtype loaded (" + reasons + ")");
  }
  torch::NoGradGuard no_grad;
  std::vector<PointSet> sets;
  for (Contender& c : contenders) sets.push_back({c.model, c.cache, c.points});
  time_rounds(sets, o.warmup, o.runs, "", progress);
  for (Contender& c : contenders) {
    for (const PointRunner& p : c.points) c.result.points.push_back(p.point);
    result.dtypes.push_back(std::move(c.result));
  }
  const std::vector<double>& baseline = result.dtypes.front().point(1).runs_ms;
  for (const DtypeResult& d : result.dtypes) {
    const std::vector<double>& runs = d.point(1).runs_ms;
    std::vector<double> ratios;
    for (size_t i = 0; i < runs.size(); ++i) ratios.push_back(baseline[i] / runs[i]);
    result.decode_speedup.push_back(median(ratios));
  }
  return result;
}

}  // namespace dspark::bench
