#include "bench/forward_bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "bench/median.h"
#include "common/error.h"
#include "engine/engine.h"
#include "model/device.h"

namespace dspark::bench {

namespace {

// Prefills `ids` into the empty `slot` `runs` times (at least once), rolling back between runs;
// the last prefill stays in the cache.
PrefillPoint time_prefills(model::Transformer& model, model::KvCache& cache, int64_t slot,
                           const std::vector<int64_t>& ids, int64_t runs,
                           const std::function<void(const std::string&)>& progress) {
  PrefillPoint p;
  p.context = static_cast<int64_t>(ids.size());
  for (int64_t run = 0; run < std::max<int64_t>(runs, 1); ++run) {
    if (progress) progress("prefill of " + std::to_string(p.context) + " tokens: run " + std::to_string(run + 1));
    cache.truncate(slot, 0);
    const auto start = std::chrono::steady_clock::now();
    model.prefill(cache, slot, ids);
    p.runs_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  p.median_ms = median(p.runs_ms);
  p.tokens_per_s = p.context / (p.median_ms * 1e-3);
  return p;
}

double kv_gib(const model::ModelConfig& c, int64_t n_slots, int64_t capacity) {
  return 2.0 * c.n_layers * n_slots * capacity * c.n_kv_heads * c.head_dim * 4 / (1024.0 * 1024 * 1024);
}

}  // namespace

std::vector<int64_t> random_ids(int64_t n, int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) id = dist(rng);
  return ids;
}

void PointRunner::run_once(model::Transformer& model, model::KvCache& cache, bool timed) {
  // On a GPU the clock must wait for the queued work on both sides, or a point's time would hold
  // the tail of the one before it.
  model::synchronize(model.device());
  const auto start = std::chrono::steady_clock::now();
  model.forward(cache, batch);
  model::synchronize(model.device());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (const model::SeqChunk& seq : batch.seqs) cache.truncate(seq.slot, point.context);
  if (timed) point.runs_ms.push_back(ms);
}

PointRunner make_point(const model::ModelConfig& c, const std::vector<int64_t>& slots, int64_t context,
                       int64_t n_seqs, int64_t n_new, std::mt19937_64& rng) {
  PointRunner p;
  p.point.shape = n_seqs == 1 ? "one_seq" : "batch";
  p.point.context = context;
  p.point.n_new = n_seqs == 1 ? n_new : n_seqs;
  p.batch.token_ids = random_ids(n_seqs * n_new, c.vocab_size, rng);
  for (int64_t s = 0; s < n_seqs; ++s) {
    p.batch.seqs.push_back({slots[s], n_new});
    for (int64_t i = 0; i < n_new; ++i) p.batch.logit_rows.push_back(s * n_new + i);
  }
  return p;
}

// Every point once per round (after an untimed call of its own), round after round, so that all
// points sample the same stretch of time: on a shared machine whose speed drifts by tens of
// percent over minutes, points timed one after another gave ratios (T(8)/T(1)) that moved with
// the drift.
void time_rounds(const std::vector<PointSet>& sets, int64_t warmup, int64_t runs, const std::string& label,
                 const std::function<void(const std::string&)>& progress) {
  const int64_t rounds = warmup + runs;
  for (int64_t round = 0; round < rounds; ++round) {
    if (progress)
      progress(label + "round " + std::to_string(round + 1) + "/" + std::to_string(rounds) +
               (round < warmup ? " (warm-up)" : ""));
    for (const PointSet& set : sets)
      for (PointRunner& p : set.points) {
        // An untimed call of the same size first: timed straight after a larger point, a small one
        // measures that point's cache and thread wake-up debris rather than its own steady cost.
        p.run_once(set.model, set.cache, false);
        p.run_once(set.model, set.cache, round >= warmup);
      }
  }
  for (const PointSet& set : sets)
    for (PointRunner& p : set.points) {
      p.point.median_ms = median(p.point.runs_ms);
      p.point.steps_per_s = 1000.0 / p.point.median_ms;
    }
}

ForwardBenchResult run_forward_bench(model::Transformer& model, const ForwardBenchOptions& options,
                                     const std::function<void(const std::string&)>& progress) {
  torch::NoGradGuard no_grad;
  const model::ModelConfig& c = model.config();
  std::mt19937_64 rng(options.seed);
  ForwardBenchResult result;
  result.weight_bytes = model.weight_bytes();
  if (std::find(options.batch_sizes.begin(), options.batch_sizes.end(), 1) == options.batch_sizes.end())
    throw Error("bench forward: --batch-sizes must hold 1 (the decode step every T(B)/T(1) is taken against)");
  const int64_t max_b = *std::max_element(options.batch_sizes.begin(), options.batch_sizes.end());

  for (int64_t context : options.contexts)
    c.check_positions(context + max_b, "bench forward: context " + std::to_string(context) + " plus " +
                                           std::to_string(max_b) + " new tokens");
  for (int64_t context : options.contexts) {
    const int64_t capacity = context + max_b;
    const int64_t n_slots = kv_gib(c, max_b, capacity) <= options.max_kv_gib ? max_b : 1;
    if (n_slots == 1)
      result.skipped.push_back("batch points at context " + std::to_string(context) + ": KV cache would exceed " +
                               std::to_string(options.max_kv_gib) + " GiB");
    model::KvCache cache = model.make_cache(n_slots, capacity);
    std::vector<int64_t> slots;
    for (int64_t s = 0; s < n_slots; ++s) slots.push_back(*cache.allocate());
    result.prefills.push_back(time_prefills(model, cache, slots[0], random_ids(context, c.vocab_size, rng),
                                            options.prefill_runs, progress));
    for (int64_t s = 1; s < n_slots; ++s) cache.copy_slot(slots[0], slots[s]);

    std::vector<PointRunner> points;
    for (int64_t b : options.batch_sizes) {
      points.push_back(make_point(c, slots, context, 1, b, rng));
      if (b > 1 && b <= n_slots) points.push_back(make_point(c, slots, context, b, 1, rng));
    }
    time_rounds({{model, cache, points}}, options.warmup, options.runs, "context " + std::to_string(context) + ": ",
                progress);
    for (PointRunner& p : points) result.points.push_back(std::move(p.point));
  }
  for (const ForwardPoint& p : result.points)
    if (p.shape == "one_seq" && p.n_new == 1 && p.context == options.contexts.front()) result.decode_step_ms = p.median_ms;
  result.weight_gb_per_s = result.weight_bytes / (result.decode_step_ms * 1e-3) / 1e9;

  if (progress) progress("autoregressive decode");
  engine::EngineRequest request;
  request.prompt_ids = random_ids(16, c.vocab_size, rng);
  request.sampling.temperature = 0;
  request.max_tokens = options.decode_tokens;
  std::vector<double> rates;
  for (int run = 0; run < 3; ++run) {
    engine::Engine engine(model, nullptr,
                          {.max_concurrency = 1, .max_context = 16 + options.decode_tokens, .schedule = schedule::ScheduleKind::kNone});
    engine.submit(request);
    rates.push_back(engine.run().front().stats.decode_tokens_per_second());
  }
  result.decode_tokens_per_s = median(rates);
  return result;
}

}  // namespace dspark::bench
