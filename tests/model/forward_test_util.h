// Forward helpers shared by the model tests: logits of every position of a prompt, greedy tokens.
#pragma once
#include <torch/torch.h>

#include <vector>

#include "engine/autoregressive.h"
#include "model/transformer.h"

namespace dspark::test {

// Logits of every position of `ids` run as one fresh sequence: [ids.size(), vocab].
inline torch::Tensor all_logits(model::Transformer& model, const std::vector<int64_t>& ids) {
  model::KvCache cache = model.make_cache(1, static_cast<int64_t>(ids.size()));
  model::ForwardBatch batch;
  batch.token_ids = ids;
  batch.seqs = {{*cache.allocate(), static_cast<int64_t>(ids.size())}};
  for (size_t i = 0; i < ids.size(); ++i) batch.logit_rows.push_back(static_cast<int64_t>(i));
  return model.forward(cache, batch).logits;
}

// n greedy tokens after `prompt` (no stop tokens).
inline std::vector<int64_t> greedy(model::Transformer& model, const std::vector<int64_t>& prompt, int64_t n) {
  engine::GenerationRequest request;
  request.prompt_ids = prompt;
  request.sampling.temperature = 0;
  request.max_tokens = n;
  return engine::generate_autoregressive(model, request, 1).front().ids;
}

}  // namespace dspark::test
