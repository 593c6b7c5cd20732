#include "draft/confidence_head.h"

namespace dspark::draft {

ConfidenceHead::ConfidenceHead(const DraftConfig& config, const WeightSource& weights, const MarkovHeadModule& markov)
    : hidden_size_(config.backbone.hidden_size) {
  if (!config.confidence_head) return;
  const int64_t d = hidden_size_, r = config.markov_rank, width = config.confidence_with_markov ? d + r : d;
  weight_ = weights.vector("confidence_head.proj.weight", {1, width});
  bias_ = weights.vector("confidence_head.proj.bias", {1});
  if (weight_.requires_grad()) return;  // the drafting tables are for fixed weights
  bias_value_ = bias_.item<float>();
  if (config.confidence_with_markov) {
    const torch::Tensor table = markov.w1().mv(weight_.view({width}).narrow(0, d, r)).cpu().contiguous();  // [vocab]
    token_terms_.assign(table.data_ptr<float>(), table.data_ptr<float>() + table.numel());
  }
}

torch::Tensor ConfidenceHead::block(const torch::Tensor& h, const torch::Tensor& w1_prev) const {
  const torch::Tensor input = weight_.size(1) > hidden_size_ ? torch::cat({h, w1_prev}, 1) : h;
  return torch::linear(input, weight_, bias_).view({-1});
}

std::vector<float> ConfidenceHead::hidden_terms(const torch::Tensor& h) const {
  const torch::Tensor part = h.mv(weight_.view({-1}).narrow(0, 0, hidden_size_)).cpu().contiguous();
  return std::vector<float>(part.data_ptr<float>(), part.data_ptr<float>() + part.numel());
}

}  // namespace dspark::draft
