#include "draft/markov_head.h"

#include <algorithm>

#include "model/kernels/linear_quant.h"
#include "model/kernels/linear_small.h"

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
  // Only drafting reads it (trainable parameters change every step).
  if (!w1_.requires_grad()) w1_is_bf16_ = torch::equal(w1_, w1_.to(torch::kBFloat16).to(torch::kFloat32));
}

torch::Tensor MarkovHeadModule::w1_rows(const torch::Tensor& ids) const { return w1_.index_select(0, ids); }

torch::Tensor MarkovHeadModule::initial_state(int64_t n, const torch::TensorOptions& options) const {
  return kind_ == MarkovHead::kRnn ? torch::zeros({n, rank_}, options) : torch::Tensor();
}

torch::Tensor MarkovHeadModule::rnn_output(const torch::Tensor& w1_prev, const torch::Tensor& hidden,
                                           torch::Tensor& state) const {
  const int64_t r = rank_;
  const torch::Tensor gco = joint_.forward(torch::cat({state, w1_prev, hidden}, 1));  // [n, 3r]
  const torch::Tensor gate = torch::sigmoid(gco.narrow(1, 0, r));
  state = gate * state + (1 - gate) * torch::tanh(gco.narrow(1, r, r));
  return torch::tanh(gco.narrow(1, 2 * r, r));
}

torch::Tensor MarkovHeadModule::bias(const torch::Tensor& w1_prev, const torch::Tensor& hidden,
                                     torch::Tensor& state) const {
  return w2_.forward(kind_ == MarkovHead::kRnn ? rnn_output(w1_prev, hidden, state) : w1_prev);
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
  const int64_t n = logits.size(0), r = rank_;
  if (!logits.is_cpu() || logits.stride(1) != 1 || w1_.requires_grad()) {
    const torch::Tensor prev_ids = torch::tensor(prev, torch::kLong).to(w1_.device());
    logits.add_(bias(w1_rows(prev_ids), hidden, state));
    return;
  }
  // The serial loop runs this once per slot, so on the CPU the [n, vocab] product skips
  // libtorch's per-op dispatch and temporaries: gather the W1 rows, then one streaming W2 product
  // added into the logits rows in place. W1 rows that are bf16 numbers (checkpoints are stored in
  // bf16) let it use bf16 dot instructions exactly; the RNN head's tanh(o) rows are not.
  torch::Tensor w1_prev = torch::empty({n, r});  // [n, r]
  const float* w1 = w1_.data_ptr<float>();
  float* rows = w1_prev.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) std::copy_n(w1 + prev[i] * r, r, rows + i * r);
  if (kind_ == MarkovHead::kRnn) {
    add_w2_product(rnn_output(w1_prev, hidden, state).contiguous(), logits, kernels::Bf16Math::kExact);
  } else {
    add_w2_product(w1_prev, logits, w1_is_bf16_ ? kernels::Bf16Math::kDotBf16 : kernels::Bf16Math::kExact);
  }
}

void MarkovHeadModule::add_w2_product(const torch::Tensor& x, torch::Tensor& logits, kernels::Bf16Math math) const {
  const int64_t n = x.size(0), r = x.size(1), vocab = logits.size(1);
  if (w2_.quantized.defined()) {
    kernels::linear_quant(x.data_ptr<float>(), n, r, w2_.quantized.packed.data_ptr(), w2_.quantized.type, vocab,
                          logits.data_ptr<float>(), logits.stride(0), /*accumulate=*/true);
    return;
  }
  kernels::linear_small_accumulate(x.data_ptr<float>(), n, r, w2_.weight.data_ptr(),
                                   model::kernel_weight_dtype(w2_.weight), vocab, logits.data_ptr<float>(),
                                   logits.stride(0), math);
}

}  // namespace dspark::draft
