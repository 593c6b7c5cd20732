// `dspark bench forward`: the cost of one target forward as a function of the number of new tokens
// B (SPS(B) in the method), at a given context length, plus prefill (prompt processing) and plain
// autoregressive decode speed.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace dspark::bench {

struct ForwardPoint {
  std::string shape;        // "one_seq": one sequence with B new tokens (a verify step);
                            // "batch": B sequences with one new token each (a decode batch)
  int64_t context = 0;      // cached positions before the forward
  int64_t n_new = 0;        // B
  double median_ms = 0;
  double steps_per_s = 0;   // SPS(B)
  std::vector<double> runs_ms;
};

// Prompt processing: one prefill of `context` tokens into an empty slot.
struct PrefillPoint {
  int64_t context = 0;
  double median_ms = 0;
  double tokens_per_s = 0;
  std::vector<double> runs_ms;
};

struct ForwardBenchOptions {
  std::vector<int64_t> contexts{256, 1024};
  std::vector<int64_t> batch_sizes{1, 2, 4, 8, 16, 32, 64};
  int64_t warmup = 2;
  int64_t runs = 7;
  double max_kv_gib = 6.0;  // "batch" points whose KV cache would exceed this are skipped
  int64_t prefill_runs = 3;  // timed prefills per context (the last one is the points' context)
  int64_t decode_tokens = 64;
  uint64_t seed = 0;
};

struct ForwardBenchResult {
  std::vector<ForwardPoint> points;
  std::vector<PrefillPoint> prefills;  // one per context
  double decode_tokens_per_s = 0;   // greedy AR decode, one sequence, short prompt
  double decode_step_ms = 0;        // median one-token step at the first context
  double weight_gb_per_s = 0;       // weight bytes / decode_step_ms
  int64_t weight_bytes = 0;
  std::vector<std::string> skipped;  // points not run, with the reason
};

// One point of the table: forwards of `n_seqs` sequences x `n_new` tokens over slots that each
// hold `context` positions; every run is rolled back so all runs see the same context.
struct PointRunner {
  ForwardPoint point;
  model::ForwardBatch batch;
  void run_once(model::Transformer& model, model::KvCache& cache, bool timed);  // timed: adds to point.runs_ms
};
PointRunner make_point(const model::ModelConfig& c, const std::vector<int64_t>& slots, int64_t context,
                       int64_t n_seqs, int64_t n_new, std::mt19937_64& rng);
std::vector<int64_t> random_ids(int64_t n, int64_t vocab, std::mt19937_64& rng);

// The points one model runs in its cache.
struct PointSet {
  model::Transformer& model;
  model::KvCache& cache;
  std::vector<PointRunner>& points;
};
// Times every point of every set once per round (warmup untimed rounds, then runs timed ones),
// then sets each point's median and SPS; progress gets `label` + "round r/R".
void time_rounds(const std::vector<PointSet>& sets, int64_t warmup, int64_t runs, const std::string& label,
                 const std::function<void(const std::string&)>& progress);

ForwardBenchResult run_forward_bench(model::Transformer& model, const ForwardBenchOptions& options,
                                     const std::function<void(const std::string&)>& progress = {});

}  // namespace dspark::bench
