#include "sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/error.h"
#include "model/kernels/softmax_row.h"

namespace dspark::sampling {

void check_sampling_params(const SamplingParams& params) {
  if (!std::isfinite(params.temperature) || params.temperature < 0)
    throw Error("sampling: temperature must be finite and >= 0 (0: greedy), got " + std::to_string(params.temperature));
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

at::Tensor sampling_probs_tensor_ops(const at::Tensor& logits, const SamplingParams& params) {
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

namespace {

// The top-p cut on probabilities p[0..n): zeroes every token outside the smallest set of most
// likely tokens whose mass reaches top_p (the crossing token is kept; ties go to the lower id).
// Sorting a 150k vocabulary per row would dominate a drafter's slot, so it sorts the top k
// candidates only, widening k until the kept set closes inside it.
void apply_top_p(float* p, int64_t n, double top_p) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto more_likely = [p](int64_t a, int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
  for (int64_t k = std::min<int64_t>(n, 256);; k = std::min(n, k * 4)) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
    double mass_before = 0.0;
    int64_t kept = -1;
    for (int64_t i = 0; i < k; ++i) {
      if (!(mass_before < top_p)) {
        kept = i;
        break;
      }
      mass_before += p[order[i]];
    }
    if (kept < 0 && k < n) continue;  // the cut lies beyond the sorted prefix: widen it
    for (int64_t i = kept < 0 ? k : kept; i < n; ++i) p[order[i]] = 0.0f;
    return;
  }
}

}  // namespace

void sampling_probs_row(const float* logits, int64_t n, const SamplingParams& params, float* probs) {
  if (params.greedy()) {
    const int64_t best = argmax(logits, n);
    std::fill(probs, probs + n, 0.0f);
    probs[best] = 1.0f;
    return;
  }
  const float temperature = static_cast<float>(params.temperature);
  if (temperature != 1.0f) {
    for (int64_t i = 0; i < n; ++i) probs[i] = logits[i] / temperature;
  } else if (probs != logits) {
    std::copy_n(logits, n, probs);
  }
  if (params.top_k > 0 && params.top_k < n) {
    std::vector<float> values(probs, probs + n);
    std::nth_element(values.begin(), values.begin() + (params.top_k - 1), values.end(), std::greater<float>());
    const float kth = values[params.top_k - 1];
    for (int64_t i = 0; i < n; ++i)
      if (probs[i] < kth) probs[i] = -INFINITY;
  }
  kernels::softmax_row(probs, n, probs);
  if (params.top_p >= 1.0 && params.min_p <= 0.0) return;
  if (params.top_p < 1.0) apply_top_p(probs, n, params.top_p);
  if (params.min_p > 0.0) {
    float p_max = 0.0f;
    for (int64_t i = 0; i < n; ++i) p_max = std::max(p_max, probs[i]);
    const float floor = static_cast<float>(params.min_p) * p_max;
    for (int64_t i = 0; i < n; ++i)
      if (probs[i] < floor) probs[i] = 0.0f;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += probs[i];
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) probs[i] *= inv;
}

at::Tensor sampling_probs(const at::Tensor& logits, const SamplingParams& params) {
  if (!logits.is_cpu()) return sampling_probs_tensor_ops(logits, params);
  const at::Tensor x = (logits.dim() == 1 ? logits.unsqueeze(0) : logits).to(torch::kFloat32).contiguous();
  at::Tensor probs = torch::empty_like(x);
  const int64_t n_rows = x.size(0), n_vocab = x.size(1);
  const float* in = x.data_ptr<float>();
  float* out = probs.data_ptr<float>();
  at::parallel_for(0, n_rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) sampling_probs_row(in + r * n_vocab, n_vocab, params, out + r * n_vocab);
  });
  return probs;
}

int64_t sample_from_probs(const float* probs, int64_t n_vocab, Rng& rng) {
  // Blocks of 16: the block sums have independent additions (the compiler pipelines them), and
  // only the block holding the draw is scanned token by token.
  constexpr int64_t kBlock = 16;
  const size_t n_blocks = static_cast<size_t>((n_vocab + kBlock - 1) / kBlock);
  // Every entry is written below, so the buffer is not zero-filled first (one draw per sampled
  // token: 150k vocabularies make that 76 KB a draw).
  const std::unique_ptr<double[]> block_sums = std::make_unique_for_overwrite<double[]>(n_blocks);
  double total = 0.0;
  for (size_t b = 0; b < n_blocks; ++b) {
    const int64_t begin = static_cast<int64_t>(b) * kBlock, end = std::min(begin + kBlock, n_vocab);
    double sum = 0.0;
    for (int64_t i = begin; i < end; ++i) sum += probs[i];
    block_sums[b] = sum;
    total += sum;
  }
  // NaN or infinite logits (a broken checkpoint) leave no mass to draw from: the request fails,
  // the process (a server's other requests) does not.
  if (!(total > 0.0) || !std::isfinite(total))
    throw Error("sampling: the distribution has no finite mass (NaN or infinite logits from the model)");
  const double target = rng.uniform() * total;
  double cumulative = 0.0;
  int64_t last_nonzero = -1;
  for (size_t b = 0; b < n_blocks; ++b) {
    if (block_sums[b] <= 0.0) continue;
    const int64_t begin = static_cast<int64_t>(b) * kBlock, end = std::min(begin + kBlock, n_vocab);
    if (cumulative + block_sums[b] <= target) {
      cumulative += block_sums[b];
      for (int64_t i = end - 1; i >= begin; --i)
        if (probs[i] > 0.0f) {
          last_nonzero = i;
          break;
        }
      continue;
    }
    for (int64_t i = begin; i < end; ++i) {
      if (probs[i] <= 0.0f) continue;
      cumulative += probs[i];
      last_nonzero = i;
      if (target < cumulative) return i;
    }
  }
  return last_nonzero;  // rounding left target just above the sum: take the last possible token
}

int64_t argmax(const float* values, int64_t n) {
  // A scan with a dependent compare runs ~1 ns a value: 8 us for an 8k vocabulary, twice per
  // greedy draft token. First the largest value, in kLanes independent maxima (compiled to vector
  // max instructions; a NaN never enters a lane, as NaN > x is false), then its first index.
  constexpr int64_t kLanes = 16;
  float lanes[kLanes];
  std::fill_n(lanes, kLanes, -INFINITY);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] = values[i + j] > lanes[j] ? values[i + j] : lanes[j];
  float top = lanes[0];
  for (int64_t j = 1; j < kLanes; ++j) top = lanes[j] > top ? lanes[j] : top;
  for (; i < n; ++i) top = values[i] > top ? values[i] : top;
  // Greedy decoding of NaN logits (damaged weights, an overflow) would otherwise print some token
  // silently; as in sampling, it is an Error, which fails the request (in serving, that request
  // alone: EngineOptions::fail_requests_alone).
  if (!(top > -INFINITY))
    throw Error("sampling: no finite value to take the argmax of (NaN or -inf logits from the model)");
  for (int64_t k = 0;; ++k)
    if (values[k] == top) return k;
}

}  // namespace dspark::sampling
