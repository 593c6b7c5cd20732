// A linear layer whose weight is shared by two execution paths:
//  - few rows (decode, verification) on the CPU: our streaming matrix-vector kernel, which reads
//    each weight once for all rows at memory speed (libtorch's small-M GEMM does not);
//  - more rows than kSmallBatchRows, autograd (training) or another device: libtorch.
// Both accumulate in f32 with f32 activations, so the two paths agree to rounding.
#pragma once
#include <torch/torch.h>

#include "model/kernels/linear_small.h"
#include "model/quantized_weight.h"

namespace dspark::model {

// Rows up to which the streaming kernel is used. The target's forward cuts longer CPU batches (a
// prefill) into pieces of this many rows, which measured 6x faster than libtorch's GEMM here
// (see Transformer::forward_in_pieces).
inline constexpr int64_t kSmallBatchRows = 64;

struct Linear {
  torch::Tensor weight;  // [n_out, n_in], f32, f16 or bf16, contiguous; undefined when quantized
  torch::Tensor bias;    // [n_out] f32, or undefined
  bool tensor_ops = false;  // always libtorch, as on a non-CPU device (Kernels::kTensorOps)
  // Q8_0 / Q4_0 weights instead of `weight`: the quantized kernel for every row count on the CPU
  // (it streams each weight once for any m), the dequantized matrix under autograd.
  QuantizedWeight quantized;

  // x: [n_rows, n_in] f32 -> [n_rows, n_out] f32
  torch::Tensor forward(const torch::Tensor& x) const;
  int64_t n_out() const { return quantized.defined() ? quantized.n_out : weight.size(0); }
  int64_t n_in() const { return quantized.defined() ? quantized.n_in : weight.size(1); }
  // Replaces `weight` by its Q8_0 / Q4_0 quantization (name: for error messages).
  void quantize(kernels::QuantType type, const std::string& name);
};

// Whether the streaming kernel would serve this call (CPU, no autograd, few rows); Linear::forward
// also needs tensor_ops off.
bool uses_small_batch_kernel(const torch::Tensor& x, const torch::Tensor& weight);

// The streaming kernel's name for a weight's dtype (f32, f16 or bf16; anything else asserts).
kernels::WeightDType kernel_weight_dtype(const torch::Tensor& weight);

}  // namespace dspark::model
