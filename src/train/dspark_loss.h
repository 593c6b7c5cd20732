// The DSpark / DFlash training loss (deepspec-spec 3.1), a pure function of one sequence's blocks.
//
//   w_k = exp(-k / decay_gamma),  W = sum of w_k m_{b,k} over the whole optimizer step
//   L_ce   = sum w m CE(Z, x*) / W
//   L_l1   = sum w m |softmax(Z) - softmax(T)|_1 / W            (full L1 = 2 TV)
//   L_conf = sum w m BCE_with_logits(c_logit, c*) / W,  c* = clamp(1 - |p_d - p_t|_1 / 2, 0, 1), detached
//   L = a_ce L_ce + a_l1 L_l1 + a_conf L_conf
// Dividing by the step's W (not the sequence's) makes gradients accumulated over the sequences of a
// step equal those of one big batch, as DeepSpec's all-reduced denominator does across ranks.
#pragma once
#include <torch/torch.h>

namespace dspark::train {

struct DSparkLossWeights {
  double ce = 0.1, l1 = 0.9, conf = 1.0;  // DSpark; DFlash is 1 / 0 / 0
  double decay_gamma = 4.0;               // loss_decay_gamma
};

struct DSparkLoss {
  torch::Tensor total;          // scalar, with grad
  double ce = 0, l1 = 0, conf = 0;  // the unweighted terms (each already / W)
  torch::Tensor c_star;         // [n, B] per-slot acceptance 1 - TV (detached), for metrics
};

// w_k for k = 0..block-1.
torch::Tensor position_weights(int64_t block_size, double decay_gamma);

DSparkLoss dspark_loss(const torch::Tensor& draft_logits,       // [n, B, V] Z
                       const torch::Tensor& target_logits,      // [n, B, V] T (no grad)
                       const torch::Tensor& labels,             // [n, B] int64 x*
                       const torch::Tensor& valid,              // [n, B] f32 0/1, m
                       const torch::Tensor& confidence_logits,  // [n, B], or undefined (no head)
                       const DSparkLossWeights& weights,
                       double weight_total);                    // W of the whole step (> 0)

// Metrics logged with the loss (not optimised): per slot the mean c* over valid labels
// (accept_rate@k), and tau_probabilistic = 1 + sum_k prod_{j<=k} c*_j m_j averaged over blocks.
struct AcceptanceMetrics {
  std::vector<double> c_star_sum, count;  // per slot
  double tau_sum = 0;
  int64_t blocks = 0;
  void add(const torch::Tensor& c_star, const torch::Tensor& valid);  // [n, B] each
  double accept_rate(size_t k) const { return count[k] > 0 ? c_star_sum[k] / count[k] : 0.0; }
  double tau() const { return blocks > 0 ? tau_sum / static_cast<double>(blocks) : 0.0; }
};

}  // namespace dspark::train
