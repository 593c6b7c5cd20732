// AdamW (decoupled weight decay, Loshchilov & Hutter) over named parameters, with its state
// exposed as named tensors so a checkpoint can hold it and a resumed run continues bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace dspark::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // applied to matrices only (not norms, not biases)
};

class AdamW {
 public:
  AdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWOptions options);

  // One update at learning rate `lr` from the parameters' .grad(); then the grads are zeroed.
  void step(double lr);
  int64_t steps_taken() const { return step_; }

  // "exp_avg.<name>" and "exp_avg_sq.<name>" for every parameter.
  std::vector<std::pair<std::string, torch::Tensor>> state() const;
  // Restores state() as saved after `steps_taken` updates; throws dspark::Error on a missing or
  // mis-shaped tensor.
  void load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state, int64_t steps_taken);

 private:
  struct Slot {
    std::string name;
    torch::Tensor param, exp_avg, exp_avg_sq;
    bool decay = false;
  };
  std::vector<Slot> slots_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

// Scales all gradients so their global L2 norm is at most max_norm; returns the norm before.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

// Linear warmup from 0 to peak over warmup_steps, then cosine decay to min_lr at total_steps.
double warmup_cosine_lr(int64_t step, int64_t warmup_steps, int64_t total_steps, double peak_lr, double min_lr);

}  // namespace dspark::train
