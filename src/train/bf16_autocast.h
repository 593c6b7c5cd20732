// CPU autocast to bf16 for one training step's forward pass: matrix products run in bf16 (with f32
// accumulation), while the f32 master weights, the optimizer state, norms and the losses stay f32.
// The backward pass follows the dtypes the forward recorded. Pays where the CPU has bf16 dot
// products (AVX512-BF16, AMX): 2.3x per step on the 20-layer target (docs/training.md).
#pragma once
#include <ATen/autocast_mode.h>

namespace dspark::train {

class Bf16Autocast {
 public:
  explicit Bf16Autocast(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
  // The cast weights are cached while autocast is on; the cache is dropped with the scope, since
  // the optimizer changes the f32 masters before the next step.
  ~Bf16Autocast() {
    if (!enabled_) return;
    at::autocast::set_cpu_enabled(false);
    at::autocast::clear_cache();
  }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool enabled_;
};

}  // namespace dspark::train
