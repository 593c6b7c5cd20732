#include "draft/eagle3_layer.h"

namespace dspark::draft {

Eagle3Layer::Eagle3Layer(const DraftConfig& config, const WeightSource& weights)
    : config_(config.backbone), rope_(config.backbone), embed_(weights.embed()), lm_head_(weights.lm_head_linear()) {
  const int64_t d = config_.hidden_size, m = static_cast<int64_t>(config.target_layer_ids.size());
  fc_ = weights.linear("fc.weight", {d, m * d});
  const std::string p = "layers.0.";
  hidden_norm_ = weights.vector(p + "hidden_norm.weight", {d});
  layer_ = weights.layer(p, config_, 2 * d);
  norm_ = weights.vector("norm.weight", {d});
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> Eagle3Layer::attention_inputs(const torch::Tensor& tokens,
                                                                                     const torch::Tensor& g,
                                                                                     const torch::Tensor& positions) const {
  const model::ModelConfig& c = config_;
  const int64_t n = g.size(0), q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const torch::Tensor embedded = embed_.index_select(0, tokens).to(torch::kFloat32);
  const torch::Tensor z = torch::cat({model::rms_norm(embedded, layer_.input_norm, c.rms_norm_eps),
                                      model::rms_norm(g, hidden_norm_, c.rms_norm_eps)}, 1);  // [n, 2d]
  const torch::Tensor qkv = layer_.qkv.forward(z);
  torch::Tensor q = qkv.narrow(1, 0, q_dim).reshape({n, c.n_heads, c.head_dim});
  torch::Tensor k = qkv.narrow(1, q_dim, kv_dim).reshape({n, c.n_kv_heads, c.head_dim});
  const torch::Tensor v = qkv.narrow(1, q_dim + kv_dim, kv_dim).reshape({n, c.n_kv_heads, c.head_dim});
  if (c.qk_norm) {
    q = model::rms_norm(q, layer_.q_norm, c.rms_norm_eps);
    k = model::rms_norm(k, layer_.k_norm, c.rms_norm_eps);
  }
  auto [cos, sin] = rope_.cos_sin(positions);
  return {model::Rope::apply(q, cos, sin), model::Rope::apply(k, cos, sin), v};
}

torch::Tensor Eagle3Layer::output(const torch::Tensor& g, const torch::Tensor& attn) const {
  return model::layer_output(layer_, config_, g, attn);
}

torch::Tensor Eagle3Layer::logits(const torch::Tensor& g) const {
  return lm_head_.forward(model::rms_norm(g, norm_, config_.rms_norm_eps));
}

}  // namespace dspark::draft
