#include "train/eagle3_train_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "draft/eagle3_layer.h"

namespace dspark::train {

Eagle3TrainModel::Eagle3TrainModel(draft::DraftConfig config, const model::Transformer& target,
                                   const NamedTensors& tensors)
    : DrafterTrainModel(std::move(config), target, tensors) {
  if (config_.method != draft::DraftMethod::kEagle3) throw Error("Eagle3TrainModel: not an EAGLE-3 config");
}

DrafterTrainModel::Output Eagle3TrainModel::forward(const torch::Tensor& features, const torch::Tensor& ids,
                                                    const std::vector<int64_t>& anchors) const {
  const model::ModelConfig& c = config_.backbone;
  const int64_t S = ids.size(0), n = static_cast<int64_t>(anchors.size()), steps = config_.ttt_length;
  const int64_t group = c.n_heads / c.n_kv_heads, q_dim = c.n_heads * c.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const torch::Device device = features.device();
  const auto long_opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  const torch::Tensor id = ids.to(device, torch::kLong);
  for (int64_t a : anchors)
    if (a < 1 || a >= S) throw Error("train drafter: an EAGLE-3 anchor must be in [1, S-1]");
  std::vector<int64_t> row_list;
  for (int64_t a : anchors) row_list.push_back(a - 1);
  const torch::Tensor rows = torch::tensor(row_list, torch::kLong).to(device);  // [n] t
  // Built from the parameters on every call: they change with every optimizer step.
  const draft::Eagle3Layer layer(config_, Params(*this));

  // Step 0 over positions 0..S-2 (the last position has no next token; no row attends to it).
  const int64_t S0 = S - 1;
  const torch::Tensor g0 = layer.project_features(features.to(torch::kFloat32).narrow(0, 0, S0));  // [S0, d]
  auto [q0, k0, v0] = layer.attention_inputs(id.narrow(0, 1, S0), g0, torch::arange(S0, long_opts));
  const torch::Tensor keys0 = k0.repeat_interleave(group, 1).transpose(0, 1);    // [H, S0, hd]
  const torch::Tensor values0 = v0.repeat_interleave(group, 1).transpose(0, 1);  // [H, S0, hd]
  const torch::Tensor future = torch::arange(S0, long_opts).unsqueeze(0) > rows.unsqueeze(1);  // [n, S0] key j > t

  std::vector<torch::Tensor> diag_keys, diag_values;  // steps 1..s: [n, H, hd] each
  std::vector<torch::Tensor> logits;
  torch::Tensor g = g0.index_select(0, rows), q = q0.index_select(0, rows);
  for (int64_t s = 0; s < steps; ++s) {
    if (s > 0) {
      const torch::Tensor tokens = id.index_select(0, (rows + s + 1).clamp_max(S - 1));
      auto [qs, ks, vs] = layer.attention_inputs(tokens, g, rows + s);
      q = qs;
      diag_keys.push_back(ks.repeat_interleave(group, 1));
      diag_values.push_back(vs.repeat_interleave(group, 1));
    }
    const torch::Tensor qh = q.transpose(0, 1);  // [H, n, hd]
    torch::Tensor scores = torch::matmul(qh, keys0.transpose(1, 2)) * scale;  // [H, n, S0]
    scores = scores.masked_fill(future.unsqueeze(0), -std::numeric_limits<float>::infinity());
    std::vector<torch::Tensor> parts{scores};
    for (const torch::Tensor& k : diag_keys) parts.push_back(((q * k).sum(-1) * scale).transpose(0, 1).unsqueeze(-1));
    const torch::Tensor p = torch::softmax(torch::cat(parts, -1), -1);  // [H, n, S0 + s]
    torch::Tensor o = torch::matmul(p.narrow(-1, 0, S0), values0);    // [H, n, hd]
    for (size_t i = 0; i < diag_values.size(); ++i)
      o = o + p.narrow(-1, S0 + static_cast<int64_t>(i), 1) * diag_values[i].transpose(0, 1);
    g = layer.output(g, o.transpose(0, 1).reshape({n, q_dim}));  // [n, d], pre-norm
    logits.push_back(layer.logits(g));
  }
  Output out;
  out.logits = torch::stack(logits, 1);  // [n, steps, V]
  return out;
}

}  // namespace dspark::train
