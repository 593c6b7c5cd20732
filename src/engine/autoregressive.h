// Plain autoregressive generation: the baseline every speculative method must reproduce exactly.
// Several samples of one prompt run as one ragged batch (one KV slot each, one decode forward per
// step), each with its own seeded random stream.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "sampling/sampling.h"

namespace dspark::engine {

struct GenerationRequest {
  std::vector<int64_t> prompt_ids;        // [n_prompt]
  sampling::SamplingParams sampling;      // sample i uses seed sampling.seed + i
  int64_t max_tokens = 128;               // new tokens per sample
  std::vector<int64_t> stop_ids;          // generation ends after any of these (not included in ids)
};

struct GenerationResult {
  std::vector<int64_t> ids;               // generated tokens, stop token excluded
  std::string finish_reason;              // "stop" (a stop id) or "length" (max_tokens)
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;             // prompt processing (shared by the samples)
  double seconds = 0;                     // wall time from the start until this sample finished
};

// Called with (sample index, token id) as each token is produced, stop tokens excluded.
using TokenCallback = std::function<void(int64_t, int64_t)>;

std::vector<GenerationResult> generate_autoregressive(model::Transformer& model, const GenerationRequest& request,
                                                      int64_t n_samples, const TokenCallback& on_token = {});

}  // namespace dspark::engine
