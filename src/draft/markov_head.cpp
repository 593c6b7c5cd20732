#include "draft/markov_head.h"

#include <algorithm>

#include "model/kernels/row_ops.h"

namespace dspark::draft {

MarkovHeadModule::MarkovHeadModule(const DraftConfig& config, const WeightSource& weights)
    : kind_(config.markov_head), rank_(config.markov_rank) {
  if (rank_ == 0) return;
  const int64_t vocab = config.backbone.vocab_size, d = config.backbone.hidden_size, r = rank_;
  w1_ = weights.vector("markov_head.markov_w1.weight", {vocab, r}).contiguous();
  w2_ = weights.linear("markov_head.markov_w2.weight", {vocab, r});
  if (kind_ == MarkovHead::kRnn) {
    joint_ = weights.linear("markov_head.joint_proj.weight", {3 * r, 2 * r + d});
    joint_.bias = weights.vector("markov_head.joint_proj.bias", {3 * r});
  }
  // Drafting's copy of W2, transposed; bf16 stays bf16, f16 is widened to f32 (exact). Other
  // dtypes (quantized weights) and trainable ones keep to libtorch.
  const torch::Tensor& w2 = w2_.weight;
  if (w2.defined() && w2.is_cpu() && !w2.requires_grad() && !w1_.requires_grad()) {
    if (w2.scalar_type() == torch::kBFloat16) w2_t_ = w2.t().contiguous();
    if (w2.scalar_type() == torch::kFloat32 || w2.scalar_type() == torch::kFloat16)
      w2_t_ = w2.t().to(torch::kFloat32).contiguous();
  }
}

torch::Tensor MarkovHeadModule::w1_rows(const torch::Tensor& ids) const { return w1_.index_select(0, ids); }

torch::Tensor MarkovHeadModule::initial_state(int64_t n, const torch::TensorOptions& options) const {
  return kind_ == MarkovHead::kRnn ? torch::zeros({n, rank_}, options) : torch::Tensor();
}

torch::Tensor MarkovHeadModule::bias(const torch::Tensor& w1_prev, const torch::Tensor& hidden,
                                     torch::Tensor& state) const {
  if (kind_ != MarkovHead::kRnn) return w2_.forward(w1_prev);  // W2 W1[x_prev]
  const int64_t r = rank_;
  const torch::Tensor gco = joint_.forward(torch::cat({state, w1_prev, hidden}, 1));  // [n, 3r]
  const torch::Tensor gate = torch::sigmoid(gco.narrow(1, 0, r));
  state = gate * state + (1 - gate) * torch::tanh(gco.narrow(1, r, r));
  return w2_.forward(torch::tanh(gco.narrow(1, 2 * r, r)));
}

torch::Tensor MarkovHeadModule::block(const torch::Tensor& w1_prev, const torch::Tensor& hidden) const {
  const int64_t n = w1_prev.size(0), B = w1_prev.size(1);
  torch::Tensor state = initial_state(n, w1_prev.options());
  if (kind_ != MarkovHead::kRnn) return bias(w1_prev.reshape({n * B, rank_}), {}, state).view({n, B, -1});
  // The recurrence unrolled over the slots, as drafting runs it, each from the true previous token.
  std::vector<torch::Tensor> slots;
  for (int64_t k = 0; k < B; ++k) slots.push_back(bias(w1_prev.select(1, k), hidden.select(1, k), state));
  return torch::stack(slots, 1);
}

void MarkovHeadModule::step(torch::Tensor logits, const std::vector<int64_t>& prev, const torch::Tensor& hidden,
                            torch::Tensor& state) const {
  const int64_t n = logits.size(0), vocab = logits.size(1), r = rank_;
  if (kind_ == MarkovHead::kVanilla && w2_t_.defined() && logits.is_cpu() && logits.stride(1) == 1) {
    // The serial loop runs this once per slot, so on the CPU it skips libtorch's per-op dispatch:
    // gather the W1 rows, then add their combination of W2's columns into the logits rows in
    // place. With W2 transposed each logit is r multiply-adds in a vector lane, not a dot product
    // of r ending in a horizontal sum: a slot of the default drafter (r = 64, 8192 logits) took
    // 24 us as dot products.
    std::vector<float> w1_prev(n * r);
    const float* w1 = w1_.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) std::copy_n(w1 + prev[i] * r, r, w1_prev.data() + i * r);
    float* y = logits.data_ptr<float>();
    if (w2_t_.scalar_type() == torch::kBFloat16)
      kernels::add_combination(y, logits.stride(0), w1_prev.data(), n, r,
                               reinterpret_cast<const uint16_t*>(w2_t_.data_ptr<c10::BFloat16>()), vocab, vocab);
    else
      kernels::add_combination(y, logits.stride(0), w1_prev.data(), n, r, w2_t_.data_ptr<float>(), vocab, vocab);
    return;
  }
  const torch::Tensor prev_ids = torch::tensor(prev, torch::kLong).to(w1_.device());
  logits.add_(bias(w1_rows(prev_ids), hidden, state));
}

}  // namespace dspark::draft
