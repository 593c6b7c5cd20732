#include "train/dspark_train_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace dspark::train {

torch::Tensor block_attention_mask(const std::vector<int64_t>& anchors, int64_t seq_len, int64_t block_size) {
  const int64_t n = static_cast<int64_t>(anchors.size());
  const torch::Tensor row_anchor = torch::tensor(anchors, torch::kLong).repeat_interleave(block_size);  // [n B]
  const torch::Tensor context = torch::arange(seq_len, torch::kLong).unsqueeze(0) < row_anchor.unsqueeze(1);
  const torch::Tensor row_block = torch::arange(n, torch::kLong).repeat_interleave(block_size);
  const torch::Tensor same_block = row_block.unsqueeze(1) == row_block.unsqueeze(0);
  return torch::cat({context, same_block}, 1);
}

DSparkTrainModel::DSparkTrainModel(draft::DraftConfig config, const model::Transformer& target,
                                   const NamedTensors& tensors)
    : DrafterTrainModel(std::move(config), target, tensors) {
  if (config_.method == draft::DraftMethod::kEagle3) throw Error("DSparkTrainModel: an EAGLE-3 config was given");
  if (config_.markov_rank > 0 && config_.markov_head == draft::MarkovHead::kRnn)
    throw Error("train drafter: the RNN Markov head cannot be trained yet (use the vanilla head)");
}

torch::Tensor DSparkTrainModel::attention(const model::DecoderLayer& layer, const torch::Tensor& x,
                                          const torch::Tensor& context, const torch::Tensor& cos_b,
                                          const torch::Tensor& sin_b, const torch::Tensor& cos_c,
                                          const torch::Tensor& sin_c, const torch::Tensor& mask) const {
  const model::ModelConfig& c = config_.backbone;
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim, group = c.n_heads / c.n_kv_heads;
  auto [q, k_block, v_block] = model::attention_inputs(layer, c, x, cos_b, sin_b);  // [nB, heads, hd]
  // Context rows: k/v projections of hidden_norm(fc(features)) with no input norm, k_norm on the
  // keys, RoPE at their own positions (deepspec-spec 2.3).
  const torch::Tensor kv = torch::linear(context, layer.qkv.weight.narrow(0, q_dim, 2 * kv_dim));
  torch::Tensor k_ctx = kv.narrow(1, 0, kv_dim).reshape({-1, c.n_kv_heads, c.head_dim});
  const torch::Tensor v_ctx = kv.narrow(1, kv_dim, kv_dim).reshape({-1, c.n_kv_heads, c.head_dim});
  if (c.qk_norm) k_ctx = model::rms_norm(k_ctx, layer.k_norm, c.rms_norm_eps);
  k_ctx = model::Rope::apply(k_ctx, cos_c, sin_c);
  const torch::Tensor keys = torch::cat({k_ctx, k_block}).repeat_interleave(group, 1).transpose(0, 1);  // [H, T, hd]
  const torch::Tensor values = torch::cat({v_ctx, v_block}).repeat_interleave(group, 1).transpose(0, 1);
  torch::Tensor scores = torch::matmul(q.transpose(0, 1), keys.transpose(1, 2)) / std::sqrt(double(c.head_dim));
  scores = scores.masked_fill(mask.logical_not().unsqueeze(0), -std::numeric_limits<float>::infinity());
  const torch::Tensor out = torch::matmul(torch::softmax(scores, -1), values);  // [H, nB, hd]
  return out.transpose(0, 1).reshape({-1, q_dim});
}

DSparkTrainModel::Output DSparkTrainModel::forward(const torch::Tensor& features, const torch::Tensor& ids,
                                                   const std::vector<int64_t>& anchors) const {
  const model::ModelConfig& c = config_.backbone;
  const int64_t S = ids.size(0), B = config_.block_size, n = static_cast<int64_t>(anchors.size());
  const torch::Device device = features.device();
  const torch::Tensor ids_cpu = ids.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* id = ids_cpu.data_ptr<int64_t>();
  std::vector<int64_t> block_ids(n * B), block_pos(n * B), prev_ids(n * B);
  for (int64_t b = 0; b < n; ++b) {
    if (anchors[b] < 0 || anchors[b] >= S) throw Error("train drafter: anchor outside the sequence");
    for (int64_t k = 0; k < B; ++k) {
      block_ids[b * B + k] = k == 0 ? id[anchors[b]] : config_.mask_token_id;
      block_pos[b * B + k] = anchors[b] + k;
      // Teacher forcing: the Markov head's previous token is the true token before the label.
      prev_ids[b * B + k] = id[std::min(anchors[b] + k, S - 1)];
    }
  }
  auto on_device = [&](const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong).to(device); };

  const torch::Tensor context =
      model::rms_norm(torch::linear(features.to(torch::kFloat32), param("fc.weight")), param("hidden_norm.weight"),
                      c.rms_norm_eps);  // [S, d]
  auto [cos_b, sin_b] = rope_.cos_sin(on_device(block_pos));
  auto [cos_c, sin_c] = rope_.cos_sin(torch::arange(S, torch::TensorOptions().dtype(torch::kLong).device(device)));
  const torch::Tensor mask = block_attention_mask(anchors, S, B).to(device);
  torch::Tensor x = embed_.index_select(0, on_device(block_ids));  // [nB, d]
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const model::DecoderLayer L = decoder_layer(l);
    x = model::layer_output(L, c, x, attention(L, x, context, cos_b, sin_b, cos_c, sin_c, mask));
  }
  const torch::Tensor h = model::rms_norm(x, param("norm.weight"), c.rms_norm_eps);
  torch::Tensor logits = torch::linear(h, lm_head_);  // [nB, V] U
  torch::Tensor w1_prev;
  if (config_.markov_rank > 0) {
    w1_prev = param("markov_head.markov_w1.weight").index_select(0, on_device(prev_ids));  // [nB, r]
    logits = logits + torch::linear(w1_prev, param("markov_head.markov_w2.weight"));
  }
  Output out;
  out.logits = logits.view({n, B, -1});
  if (config_.confidence_head) {
    const torch::Tensor feat = config_.confidence_with_markov ? torch::cat({h, w1_prev}, 1) : h;
    out.confidence_logits = torch::linear(feat, param("confidence_head.proj.weight"), param("confidence_head.proj.bias"))
                                .view({n, B});
  }
  return out;
}

}  // namespace dspark::train
