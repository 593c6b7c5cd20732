// Forward helpers for the model tests: logits of every position of a prompt, greedy tokens (on the
// model alone, no engine).
#pragma once
#include <torch/torch.h>

#include <vector>

#include "model/transformer.h"

namespace dspark::test {

// Logits of every position of `ids` run as one fresh sequence: [ids.size(), vocab].
inline torch::Tensor all_logits(model::Transformer& model, const std::vector<int64_t>& ids) {
  model::KvCache cache = model.make_cache(1, static_cast<int64_t>(ids.size()));
  model::ForwardBatch batch;
  batch.token_ids = ids;
  batch.seqs = {{*cache.allocate(), static_cast<int64_t>(ids.size())}};
  for (size_t i = 0; i < ids.size(); ++i) batch.logit_rows.push_back(static_cast<int64_t>(i));
  return model.forward(cache, batch).logits.cpu();
}

}  // namespace dspark::test
