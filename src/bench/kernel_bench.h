// `dspark bench kernels`: a decode or verify step of one sequence split into its parts, each timed
// alone: the decoder layers' linear layers, the LM head, and attention over a KV cache of the
// given context (kernels::attention_small, the step's own kernel). For each new-token count B the
// parts' times show where T(B) - T(1) goes. Every round times every part at every B, so a shared
// machine's drift falls on all alike. Attention runs over a cache as large as the model's (cold:
// streamed from memory as in a step) or over one layer's cache reused for every layer (hot: in the
// CPU's caches), which separates its arithmetic from its memory traffic.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace dspark::bench {

struct KernelBenchOptions {
  int64_t context = 1024;
  std::vector<int64_t> batch_sizes{1, 8};  // new tokens B of the one sequence
  int64_t warmup = 2;
  int64_t runs = 9;
  uint64_t seed = 0;
};

struct KernelPoint {
  int64_t n_new = 0;         // B
  double linears_ms = 0;     // every decoder layer's q/k/v, o, gate/up and down for B rows (median)
  double lm_head_ms = 0;     // the LM head for B rows
  double attention_ms = 0;   // every layer's attention of B new tokens over `context` cold positions
  double attention_hot_ms = 0;  // the same over one layer's cache, reused (in the CPU's caches)
};

struct KernelBenchResult {
  std::vector<KernelPoint> points;  // one per B, in options' order
  int64_t kv_bytes_per_step = 0;    // the cache a step's attention reads at `context`
};

KernelBenchResult run_kernel_bench(const model::Transformer& model, const KernelBenchOptions& options,
                                   const std::function<void(const std::string&)>& progress = {});

}  // namespace dspark::bench
