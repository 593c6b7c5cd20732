#include "draft/grouped_attention.h"

#include <cmath>
#include <limits>

namespace dspark::draft {

torch::Tensor grouped_attention(const torch::Tensor& q, const torch::Tensor& keys, const torch::Tensor& values,
                                const torch::Tensor& allowed) {
  const int64_t n = q.size(0), n_heads = q.size(1), hd = q.size(2), n_kv = keys.size(0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const torch::Tensor qg = q.reshape({n, n_kv, n_heads / n_kv, hd}).permute({1, 2, 0, 3});  // [kv, g, n, hd]
  torch::Tensor scores = torch::matmul(qg, keys.unsqueeze(1).transpose(-1, -2)) * scale;    // [kv, g, n, T]
  if (allowed.defined()) scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  const torch::Tensor o = torch::matmul(torch::softmax(scores, -1), values.unsqueeze(1));    // [kv, g, n, hd]
  return o.permute({2, 0, 1, 3}).reshape({n, n_heads * hd});
}

}  // namespace dspark::draft
