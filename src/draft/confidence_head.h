// DSpark's confidence head (deepspec-spec 2.9): logit_k = w [h_k ; W1[x_{k-1}]] + b (or w h_k
// without the Markov part), c_k = sigmoid(logit_k). It reads the Markov head's W1 table.
// block() scores whole blocks (training); drafting splits the logit into an h_k term for every
// row at once (hidden_terms) and a per-token table for the W1 part, so the serial slot loop only
// adds scalars (logit).
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "draft/draft_config.h"
#include "draft/drafter_weights.h"
#include "draft/markov_head.h"

namespace dspark::draft {

class ConfidenceHead {
 public:
  ConfidenceHead() = default;  // none
  ConfidenceHead(const DraftConfig& config, const WeightSource& weights, const MarkovHeadModule& markov);

  bool enabled() const { return weight_.defined(); }
  // h [n, hidden] final-normed backbone rows, w1_prev [n, r] W1 of each row's previous token
  // (ignored without the Markov part) -> logits [n].
  torch::Tensor block(const torch::Tensor& h, const torch::Tensor& w1_prev) const;
  // Drafting: w [:hidden] . h for every row of h [n, hidden], on the host.
  std::vector<float> hidden_terms(const torch::Tensor& h) const;
  // Drafting: the logit of a row from its hidden term and its previous token.
  float logit(float hidden_term, int64_t prev) const {
    return hidden_term + (token_terms_.empty() ? 0.0f : token_terms_[prev]) + bias_value_;
  }

 private:
  int64_t hidden_size_ = 0;
  torch::Tensor weight_;              // [1, hidden (+ r)] f32
  torch::Tensor bias_;                // [1] f32
  float bias_value_ = 0;              // bias_, on the host
  std::vector<float> token_terms_;    // [vocab] w[hidden:] . W1[x] for every token x (drafting, with Markov part)
};

}  // namespace dspark::draft
