// Attention of a drafter's query rows over a set of keys, with grouped-query heads and an optional
// mask: the one attention the drafter networks' libtorch executions use (DSpark blocks from the
// draft cache or under the training block mask, EAGLE-3 rows from its cache).
#pragma once
#include <torch/torch.h>

namespace dspark::draft {

// q: [n, n_heads, hd] (rotated), keys / values: [n_kv_heads, T, hd], allowed: [n, T] bool (true:
// query row may attend to the key) or undefined (every key). Returns [n, n_heads * hd]; query head
// h reads kv head h / (n_heads / n_kv_heads).
torch::Tensor grouped_attention(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& values,
                                const torch::Tensor& allowed);

}  // namespace dspark::draft
