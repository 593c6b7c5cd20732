#include "train/dspark_loss.h"

#include <cmath>

#include "common/error.h"

namespace dspark::train {

torch::Tensor position_weights(int64_t block_size, double decay_gamma) {
  return torch::exp(-torch::arange(block_size, torch::kFloat32) / decay_gamma);
}

DSparkLoss dspark_loss(const torch::Tensor& draft_logits, const torch::Tensor& target_logits,
                       const torch::Tensor& labels, const torch::Tensor& valid,
                       const torch::Tensor& confidence_logits, const DSparkLossWeights& w, double weight_total) {
  if (weight_total <= 0) throw Error("dspark_loss: the step's weight total must be > 0");
  const int64_t block = draft_logits.size(1);
  // [n, B]: w_k m_{b,k}
  const torch::Tensor wm = valid * position_weights(block, w.decay_gamma).to(valid.device()).unsqueeze(0);
  const torch::Tensor z = draft_logits.to(torch::kFloat32);
  const torch::Tensor log_p_d = torch::log_softmax(z, -1);
  const torch::Tensor p_d = log_p_d.exp();
  const torch::Tensor p_t = torch::softmax(target_logits.to(torch::kFloat32), -1);

  const torch::Tensor ce = -log_p_d.gather(-1, labels.unsqueeze(-1)).squeeze(-1);  // [n, B]
  const torch::Tensor l1 = (p_d - p_t).abs().sum(-1);                               // [n, B]
  const torch::Tensor c_star = (1.0 - 0.5 * l1.detach()).clamp(0.0, 1.0);
  DSparkLoss out;
  out.c_star = c_star;
  const torch::Tensor l_ce = (wm * ce).sum() / weight_total;
  const torch::Tensor l_l1 = (wm * l1).sum() / weight_total;
  torch::Tensor total = w.ce * l_ce + w.l1 * l_l1;
  out.ce = l_ce.item<double>();
  out.l1 = l_l1.item<double>();
  if (confidence_logits.defined()) {
    const torch::Tensor bce = torch::binary_cross_entropy_with_logits(confidence_logits, c_star, {}, {},
                                                                      at::Reduction::None);
    const torch::Tensor l_conf = (wm * bce).sum() / weight_total;
    total = total + w.conf * l_conf;
    out.conf = l_conf.item<double>();
  }
  out.total = total;
  return out;
}

void AcceptanceMetrics::add(const torch::Tensor& c_star, const torch::Tensor& valid) {
  const torch::Tensor c = (c_star * valid).to(torch::kCPU, torch::kDouble).contiguous();
  const torch::Tensor m = valid.to(torch::kCPU, torch::kDouble).contiguous();
  const int64_t n = c.size(0), block = c.size(1);
  if (c_star_sum.empty()) c_star_sum.assign(block, 0.0), count.assign(block, 0.0);
  const double* cp = c.data_ptr<double>();
  const double* mp = m.data_ptr<double>();
  for (int64_t b = 0; b < n; ++b) {
    if (mp[b * block] == 0) continue;  // a block with no label
    double survive = 1.0, tau = 1.0;
    for (int64_t k = 0; k < block; ++k) {
      c_star_sum[k] += cp[b * block + k];
      count[k] += mp[b * block + k];
      survive *= cp[b * block + k];
      tau += survive;
    }
    tau_sum += tau;
    ++blocks;
  }
}

}  // namespace dspark::train
