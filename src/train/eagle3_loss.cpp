#include "train/eagle3_loss.h"

#include "common/error.h"

namespace dspark::train {

Eagle3Loss eagle3_loss(const torch::Tensor& draft_logits, const torch::Tensor& target_logits, const torch::Tensor& valid,
                       double step_decay, double row_total) {
  if (row_total <= 0) throw Error("eagle3_loss: the step's row total must be > 0");
  const int64_t steps = draft_logits.size(1);
  const torch::Tensor decay = torch::pow(torch::full({steps}, step_decay, torch::kFloat64),
                                         torch::arange(steps, torch::kFloat64)).to(valid.device(), torch::kFloat32);
  const torch::Tensor log_p_d = torch::log_softmax(draft_logits.to(torch::kFloat32), -1);
  const torch::Tensor p_t = torch::softmax(target_logits.to(torch::kFloat32), -1);
  const torch::Tensor soft_ce = -(p_t * log_p_d).sum(-1);  // [n, steps]
  Eagle3Loss out;
  out.total = (valid * decay.unsqueeze(0) * soft_ce).sum() / row_total;
  out.soft_ce = out.total.item<double>();
  out.c_star = (1.0 - 0.5 * (log_p_d.detach().exp() - p_t).abs().sum(-1)).clamp(0.0, 1.0);
  return out;
}

}  // namespace dspark::train
