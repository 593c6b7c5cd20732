// DSpark's Markov head (deepspec-spec 2.8): a bias on slot k's logits from the previous token,
// Z_k = U_k + bias(x_{k-1}), x_{-1} = the anchor.
//   vanilla: bias = W2 W1[x_{k-1}]
//   RNN:     [g; c; o] = J [s_{k-1}; W1[x_{k-1}]; h_k] + b_J,  s_k = sigmoid(g) s_{k-1} + (1 - sigmoid(g)) tanh(c),
//            bias = W2 tanh(o),  s_{-1} = 0
// Two entry points over one recurrence: block() for training (teacher forcing: every slot's true
// previous token is known, so all slots at once) and step() for drafting (one slot of several
// requests, the previous token just sampled). draft::MarkovHead (draft_config.h) names the kind.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "draft/draft_config.h"
#include "draft/drafter_weights.h"
#include "model/kernels/linear_small.h"
#include "model/linear.h"

namespace dspark::draft {

class MarkovHeadModule {
 public:
  MarkovHeadModule() = default;  // none (DFlash, markov_rank 0)
  MarkovHeadModule(const DraftConfig& config, const WeightSource& weights);

  bool enabled() const { return rank_ > 0; }
  int64_t rank() const { return rank_; }
  // W1 rows of tokens: ids [n] int64 -> [n, r] (the confidence head reads them too).
  torch::Tensor w1_rows(const torch::Tensor& ids) const;
  const torch::Tensor& w1() const { return w1_; }  // [vocab, r] f32

  // Teacher forced: w1_prev [n, B, r] W1 of every slot's true previous token (slot 0: the anchor),
  // hidden [n, B, hidden] h_k (read by the RNN head only). Returns the bias [n, B, vocab].
  torch::Tensor block(const torch::Tensor& w1_prev, const torch::Tensor& hidden) const;
  // One slot while drafting: logits [n, vocab] (rows may be strided) += the bias for the
  // requests' previous tokens prev [n], in place (U_k becomes Z_k). hidden [n, hidden] h_k; state
  // [n, r] the RNN head's s_{k-1}, updated (start from initial_state).
  void step(torch::Tensor logits, const std::vector<int64_t>& prev, const torch::Tensor& hidden,
            torch::Tensor& state) const;
  // s_{-1}: [n, r] zeros (undefined for the vanilla head).
  torch::Tensor initial_state(int64_t n, const torch::TensorOptions& options) const;

 private:
  // The recurrence for one slot of n rows: w1_prev [n, r], hidden [n, hidden], state [n, r]
  // (RNN, updated). Returns the bias [n, vocab].
  torch::Tensor bias(const torch::Tensor& w1_prev, const torch::Tensor& hidden, torch::Tensor& state) const;
  // The RNN head's part of it: updates state [n, r] and returns tanh(o) [n, r], W2's input.
  torch::Tensor rnn_output(const torch::Tensor& w1_prev, const torch::Tensor& hidden, torch::Tensor& state) const;
  // logits [n, vocab] (rows strided, columns contiguous, CPU) += x [n, r] (contiguous f32) W2^T, in place.
  void add_w2_product(const torch::Tensor& x, torch::Tensor& logits, kernels::Bf16Math math) const;

  MarkovHead kind_ = MarkovHead::kNone;
  int64_t rank_ = 0;
  torch::Tensor w1_;         // [vocab, r] f32, contiguous (row lookup)
  model::Linear w2_;         // [vocab, r]
  model::Linear joint_;      // [3r, 2r + hidden] with bias (RNN head)
  bool w1_is_bf16_ = false;  // drafting: every W1 value is a bf16 number (checkpoints are stored in bf16)
};

}  // namespace dspark::draft
