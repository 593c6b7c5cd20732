// The EAGLE-3 training-time-test loss (deepspec-spec 3.2), a pure function of one sequence's
// unrolled steps:
//   L = sum_s decay^s sum_rows m_{b,s} softCE(p_t, Z_{b,s}) / N,   softCE(p, z) = -sum_v p_v log softmax(z)_v
// with p_t the target's distribution at temperature 1 for the same token and N the step's row
// count (DeepSpec divides by every position of the micro-batch; we score sampled rows, so their
// count is the equivalent divisor). c* = 1 - TV(p_d, p_t) per (row, step) is returned for the
// same acceptance metrics as DSpark's.
#pragma once
#include <torch/torch.h>

namespace dspark::train {

struct Eagle3Loss {
  torch::Tensor total;   // scalar, with grad
  double soft_ce = 0;    // the weighted sum / N, as a number
  torch::Tensor c_star;  // [n, steps] 1 - TV (detached)
};

Eagle3Loss eagle3_loss(const torch::Tensor& draft_logits,   // [n, steps, V]
                       const torch::Tensor& target_logits,  // [n, steps, V] (no grad)
                       const torch::Tensor& valid,          // [n, steps] f32 0/1
                       double step_decay,                   // 0.8 (step_loss_decay)
                       double row_total);                   // N of the whole optimizer step (> 0)

}  // namespace dspark::train
