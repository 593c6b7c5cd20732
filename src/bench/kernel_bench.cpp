#include "bench/kernel_bench.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>

#include "bench/median.h"
#include "common/error.h"
#include "model/kernels/attention_small.h"

namespace dspark::bench {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Random inputs of B rows for every linear layer's width, made once.
struct LinearInputs {
  torch::Tensor hidden, attention, intermediate;  // [B, hidden], [B, n_heads hd], [B, intermediate]
};

double time_linears(const model::Transformer& model, const LinearInputs& x) {
  const auto start = Clock::now();
  for (const model::DecoderLayer& layer : model.layers()) {
    layer.qkv.forward(x.hidden);
    layer.o_proj.forward(x.attention);
    layer.gate_up.forward(x.hidden);
    layer.down.forward(x.intermediate);
  }
  return ms_since(start);
}

// Every layer's attention of n_new tokens after `context` cached positions; keys/values[l] is the
// cache layer l reads (slot 0 of the cache's storage, kv_cache.h).
double time_attention(const model::ModelConfig& c, const torch::Tensor& q, int64_t n_new, int64_t context,
                      int64_t capacity, kernels::KvDtype kv_dtype, const std::vector<torch::Tensor>& keys,
                      const std::vector<torch::Tensor>& values) {
  torch::Tensor out = torch::empty({n_new, c.n_heads * c.head_dim});
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const auto start = Clock::now();
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const kernels::AttentionSeq seq{keys[l].data_ptr(), values[l].data_ptr(), context, 0, n_new};
    kernels::attention_small(q.data_ptr<float>(), c.n_heads * c.head_dim, &seq, 1, c.n_heads, c.n_kv_heads,
                             c.head_dim, capacity, scale, out.data_ptr<float>(), kv_dtype);
  }
  return ms_since(start);
}

}  // namespace

KernelBenchResult run_kernel_bench(const model::Transformer& model, const KernelBenchOptions& o,
                                   const std::function<void(const std::string&)>& progress) {
  const model::ModelConfig& c = model.config();
  if (o.context < 1) throw Error("bench kernels: --context must be at least 1");
  if (o.runs < 1) throw Error("bench kernels: --runs must be at least 1");
  for (int64_t b : o.batch_sizes)
    if (b < 1 || b > model::kSmallBatchRows)
      throw Error("bench kernels: every B must be in [1, " + std::to_string(model::kSmallBatchRows) +
                  "] (the rows of a decode or verify step's kernels)");
  if (!model.device().is_cpu()) throw Error("bench kernels: the step's kernels run on the CPU only");
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(o.seed);
  int64_t max_b = 1;
  for (int64_t b : o.batch_sizes) max_b = std::max(max_b, b);

  // The model's cache, filled with random keys and values: a step's attention streams it.
  model::KvCache cache = model.make_cache(1, o.context + max_b);
  const int64_t capacity = cache.capacity();  // a bf16 cache rounds it up to whole key blocks
  std::vector<torch::Tensor> keys, values, hot_keys, hot_values;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    cache.keys(l).uniform_(-1, 1, gen);
    cache.values(l).uniform_(-1, 1, gen);
    keys.push_back(cache.keys(l)[0]);
    values.push_back(cache.values(l)[0]);
    hot_keys.push_back(keys[0]);
    hot_values.push_back(values[0]);
  }

  std::vector<LinearInputs> inputs;
  std::vector<torch::Tensor> queries;
  for (int64_t b : o.batch_sizes) {
    inputs.push_back({torch::randn({b, c.hidden_size}, gen), torch::randn({b, c.n_heads * c.head_dim}, gen),
                      torch::randn({b, c.intermediate_size}, gen)});
    queries.push_back(torch::randn({b, c.n_heads * c.head_dim}, gen));
  }

  const size_t n = o.batch_sizes.size();
  std::vector<std::vector<double>> linears(n), heads(n), cold(n), hot(n);
  for (int64_t round = 0; round < o.warmup + o.runs; ++round) {
    const bool timed = round >= o.warmup;
    if (progress) progress((timed ? "round " : "warm-up ") + std::to_string(round + 1) + "/" +
                           std::to_string(o.warmup + o.runs));
    for (size_t i = 0; i < n; ++i) {
      const int64_t b = o.batch_sizes[i];
      const double t_linears = time_linears(model, inputs[i]);
      auto start = Clock::now();
      model.lm_head(inputs[i].hidden);
      const double t_head = ms_since(start);
      const double t_cold = time_attention(c, queries[i], b, o.context, capacity, cache.dtype(), keys, values);
      const double t_hot = time_attention(c, queries[i], b, o.context, capacity, cache.dtype(), hot_keys, hot_values);
      if (!timed) continue;
      linears[i].push_back(t_linears);
      heads[i].push_back(t_head);
      cold[i].push_back(t_cold);
      hot[i].push_back(t_hot);
    }
  }
  KernelBenchResult r;
  r.kv_bytes_per_step = 2 * c.n_layers * c.n_kv_heads * o.context * c.head_dim * cache.keys(0).element_size();
  for (size_t i = 0; i < n; ++i)
    r.points.push_back({o.batch_sizes[i], median(linears[i]), median(heads[i]), median(cold[i]), median(hot[i])});
  return r;
}

}  // namespace dspark::bench
