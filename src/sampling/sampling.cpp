#include "sampling/sampling.h"

#include <cmath>
#include <string>

#include <torch/torch.h>

#include "common/error.h"

namespace dspark::sampling {

void check_sampling_params(const SamplingParams& params) {
  if (!std::isfinite(params.temperature))
    throw Error("sampling: temperature must be finite, got " + std::to_string(params.temperature));
  if (params.top_k < 0) throw Error("sampling: top_k must be >= 0, got " + std::to_string(params.top_k));
  if (!(params.top_p > 0.0 && params.top_p <= 1.0))
    throw Error("sampling: top_p must be in (0, 1], got " + std::to_string(params.top_p));
  if (!(params.min_p >= 0.0 && params.min_p <= 1.0))
    throw Error("sampling: min_p must be in [0, 1], got " + std::to_string(params.min_p));
}

namespace {

// Keeps, per row, the smallest set of most likely tokens whose mass reaches top_p (the token that
// crosses the threshold is kept, as in Hugging Face).
at::Tensor top_p_mask(const at::Tensor& probs, double top_p) {  // probs [n, vocab]
  auto [sorted, order] = probs.sort(/*dim=*/-1, /*descending=*/true);
  at::Tensor mass_before = sorted.cumsum(-1) - sorted;  // mass of strictly more likely tokens
  at::Tensor keep_sorted = mass_before < top_p;
  return torch::zeros_like(keep_sorted).scatter_(-1, order, keep_sorted);
}

}  // namespace

at::Tensor sampling_probs(const at::Tensor& logits, const SamplingParams& params) {
  at::Tensor x = logits.to(torch::kFloat32);
  if (x.dim() == 1) x = x.unsqueeze(0);
  if (params.greedy()) {
    at::Tensor best = x.argmax(-1, /*keepdim=*/true);
    return torch::zeros_like(x).scatter_(-1, best, 1.0);
  }
  x = x / params.temperature;
  const int64_t n_vocab = x.size(-1);
  if (params.top_k > 0 && params.top_k < n_vocab) {
    at::Tensor kth = std::get<0>(x.topk(params.top_k, -1)).narrow(-1, params.top_k - 1, 1);
    x = x.masked_fill(x < kth, -INFINITY);
  }
  at::Tensor probs = torch::softmax(x, -1);
  if (params.top_p < 1.0) probs = probs * top_p_mask(probs, params.top_p);
  if (params.min_p > 0.0) {
    at::Tensor p_max = std::get<0>(probs.max(-1, /*keepdim=*/true));
    probs = probs.masked_fill(probs < params.min_p * p_max, 0.0);
  }
  return probs / probs.sum(-1, /*keepdim=*/true);
}

int64_t sample_from_probs(const float* probs, int64_t n_vocab, Rng& rng) {
  double total = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) total += probs[i];
  DSPARK_ASSERT(total > 0.0);
  const double target = rng.uniform() * total;
  double cumulative = 0.0;
  int64_t last_nonzero = -1;
  for (int64_t i = 0; i < n_vocab; ++i) {
    if (probs[i] <= 0.0f) continue;
    cumulative += probs[i];
    last_nonzero = i;
    if (target < cumulative) return i;
  }
  return last_nonzero;  // rounding left target just above the sum: take the last possible token
}

int64_t argmax(const float* values, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (values[i] > values[best]) best = i;
  return best;
}

}  // namespace dspark::sampling
