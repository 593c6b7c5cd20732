// Rotary position embedding, rotate-half convention (Hugging Face Llama/Qwen), with optional
// llama3 frequency scaling (from its parameters, or as per-frequency divisors from a GGUF file).
#pragma once
#include <torch/torch.h>

#include <vector>

#include "model/config.h"

namespace dspark::model {

class Rope {
 public:
  explicit Rope(const ModelConfig& config);

  // x: [n_tokens, n_heads, head_dim], positions: [n_tokens] int64 (same device). Returns rotated x.
  torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& positions) const;
  // cos/sin tables for the given positions: [n_tokens, 1, head_dim] each, so several tensors (q and
  // k) can share one evaluation.
  std::pair<torch::Tensor, torch::Tensor> cos_sin(const torch::Tensor& positions) const;
  // The same tables on the CPU as rows, [n_tokens, head_dim] f32 each (the rows kernels' layout),
  // computed without libtorch ops: a drafting call needs a dozen rows.
  std::pair<torch::Tensor, torch::Tensor> cos_sin_rows(const std::vector<int64_t>& positions) const;
  static torch::Tensor apply(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
  const torch::Tensor& inv_freq() const { return inv_freq_; }  // [head_dim / 2] f64

 private:
  torch::Tensor inv_freq_;  // [head_dim / 2] f64
};

}  // namespace dspark::model
