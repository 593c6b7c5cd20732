#include "train/adamw.h"

#include <cmath>
#include <map>

#include "common/error.h"

namespace dspark::train {

AdamW::AdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWOptions options) : options_(options) {
  for (auto& [name, param] : params) {
    Slot slot;
    slot.name = name;
    slot.param = param;
    slot.exp_avg = torch::zeros_like(param, torch::MemoryFormat::Contiguous);
    slot.exp_avg_sq = torch::zeros_like(param, torch::MemoryFormat::Contiguous);
    slot.decay = param.dim() >= 2;
    slots_.push_back(std::move(slot));
  }
}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  const double bias1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  for (Slot& s : slots_) {
    torch::Tensor grad = s.param.grad();
    if (!grad.defined()) continue;
    if (s.decay && options_.weight_decay > 0) s.param.mul_(1.0 - lr * options_.weight_decay);
    s.exp_avg.mul_(options_.beta1).add_(grad, 1.0 - options_.beta1);
    s.exp_avg_sq.mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
    torch::Tensor denom = (s.exp_avg_sq / bias2).sqrt_().add_(options_.eps);
    s.param.addcdiv_(s.exp_avg, denom, -lr / bias1);
    grad.zero_();
  }
}

std::vector<std::pair<std::string, torch::Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const Slot& s : slots_) {
    out.emplace_back("exp_avg." + s.name, s.exp_avg);
    out.emplace_back("exp_avg_sq." + s.name, s.exp_avg_sq);
  }
  return out;
}

void AdamW::load_state(const std::vector<std::pair<std::string, torch::Tensor>>& state, int64_t steps_taken) {
  std::map<std::string, torch::Tensor> by_name(state.begin(), state.end());
  torch::NoGradGuard no_grad;
  for (Slot& s : slots_) {
    for (auto [prefix, target] : {std::pair{"exp_avg.", &s.exp_avg}, std::pair{"exp_avg_sq.", &s.exp_avg_sq}}) {
      auto it = by_name.find(prefix + s.name);
      if (it == by_name.end()) throw Error("optimizer state has no tensor " + std::string(prefix) + s.name);
      if (!it->second.sizes().equals(target->sizes()))
        throw Error("optimizer state tensor " + std::string(prefix) + s.name + " has the wrong shape");
      target->copy_(it->second);
    }
  }
  step_ = steps_taken;
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  double total = 0;
  for (const torch::Tensor& p : params)
    if (p.grad().defined()) total += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
  const double norm = std::sqrt(total);
  if (max_norm > 0 && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const torch::Tensor& p : params)
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  return norm;
}

double warmup_cosine_lr(int64_t step, int64_t warmup_steps, int64_t total_steps, double peak_lr, double min_lr) {
  if (warmup_steps > 0 && step < warmup_steps) return peak_lr * static_cast<double>(step + 1) / warmup_steps;
  if (step >= total_steps) return min_lr;
  const double progress = static_cast<double>(step - warmup_steps) / std::max<int64_t>(1, total_steps - warmup_steps);
  return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace dspark::train
