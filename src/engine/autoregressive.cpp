#include "engine/autoregressive.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace dspark::engine {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One token per row of logits [n, vocab], each row drawn with its own stream.
std::vector<int64_t> next_tokens(const torch::Tensor& logits, const sampling::SamplingParams& params,
                                 std::vector<sampling::Rng*> rngs) {
  // Greedy needs no probability vector: the argmax of the logits is the token.
  torch::Tensor rows = (params.greedy() ? logits.to(torch::kFloat32) : sampling::sampling_probs(logits, params))
                           .cpu()
                           .contiguous();
  std::vector<int64_t> tokens;
  for (int64_t r = 0; r < rows.size(0); ++r) {
    const float* row = rows[r].data_ptr<float>();
    tokens.push_back(params.greedy() ? sampling::argmax(row, rows.size(1))
                                     : sampling::sample_from_probs(row, rows.size(1), *rngs[r]));
  }
  return tokens;
}

}  // namespace

std::vector<GenerationResult> generate_autoregressive(model::Transformer& model, const GenerationRequest& request,
                                                      int64_t n_samples, const TokenCallback& on_token) {
  sampling::check_sampling_params(request.sampling);
  if (request.prompt_ids.empty()) throw Error("generate: the prompt is empty");
  if (n_samples < 1) throw Error("generate: --num-samples must be >= 1");
  if (request.max_tokens < 0) throw Error("generate: --max-tokens must be >= 0");
  const auto start = std::chrono::steady_clock::now();
  const int64_t n_prompt = static_cast<int64_t>(request.prompt_ids.size());
  model::KvCache cache = model.make_cache(n_samples, n_prompt + request.max_tokens + 1);

  std::vector<int64_t> slots;
  std::vector<sampling::Rng> rngs;
  for (int64_t i = 0; i < n_samples; ++i) {
    slots.push_back(*cache.allocate());
    rngs.emplace_back(request.sampling.seed + static_cast<uint64_t>(i));
  }
  std::vector<GenerationResult> results(n_samples);
  torch::Tensor first_logits = model.prefill(cache, slots[0], request.prompt_ids).logits;
  for (int64_t i = 1; i < n_samples; ++i) cache.copy_slot(slots[0], slots[i]);
  const double prefill_seconds = seconds_since(start);

  std::vector<int64_t> active(n_samples);  // sample indices still generating
  for (int64_t i = 0; i < n_samples; ++i) active[i] = i;
  torch::Tensor logits = first_logits.expand({n_samples, first_logits.size(1)});
  auto is_stop = [&](int64_t token) {
    return std::find(request.stop_ids.begin(), request.stop_ids.end(), token) != request.stop_ids.end();
  };
  auto finish = [&](int64_t sample, const char* reason) {
    results[sample].finish_reason = reason;
    results[sample].seconds = seconds_since(start);
  };

  if (request.max_tokens == 0) active.clear();
  while (!active.empty()) {
    std::vector<sampling::Rng*> active_rngs;
    for (int64_t i : active) active_rngs.push_back(&rngs[i]);
    const std::vector<int64_t> tokens = next_tokens(logits, request.sampling, active_rngs);

    std::vector<int64_t> still_active, feed_slots, feed_tokens;
    for (size_t a = 0; a < active.size(); ++a) {
      const int64_t sample = active[a];
      if (is_stop(tokens[a])) {
        finish(sample, "stop");
        continue;
      }
      results[sample].ids.push_back(tokens[a]);
      if (on_token) on_token(sample, tokens[a]);
      if (static_cast<int64_t>(results[sample].ids.size()) >= request.max_tokens) {
        finish(sample, "length");
        continue;
      }
      still_active.push_back(sample);
      feed_slots.push_back(slots[sample]);
      feed_tokens.push_back(tokens[a]);
    }
    active = std::move(still_active);
    if (!active.empty()) logits = model.decode(cache, feed_slots, feed_tokens);
  }
  for (GenerationResult& r : results) {
    if (r.finish_reason.empty()) r.finish_reason = "length";
    r.prompt_tokens = n_prompt;
    r.prefill_seconds = prefill_seconds;
    if (r.seconds == 0) r.seconds = seconds_since(start);
  }
  return results;
}

}  // namespace dspark::engine
