// A linear layer whose weight is shared by two execution paths:
//  - on the CPU without autograd: our streaming matrix-vector kernel, which reads each weight once
//    for all rows at memory speed (libtorch's small-M GEMM does not), in pieces of kSmallBatchRows
//    rows when there are more and the weight is bf16 or f16 (libtorch would widen the whole matrix
//    to f32 on every call first);
//  - autograd (training), another device, or more rows of f32 weights: libtorch.
// Both accumulate in f32 with f32 activations, so the two paths agree to rounding, unless the
// layer asks for bf16 dot products (bf16_math), which only drafters do.
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
  // How the streaming kernel multiplies bf16 weights. kExact everywhere the result must equal an
  // f32 matmul (the target); kDotBf16 (activations rounded to bf16, half the instructions) for a
  // drafter's layers, whose numerics only shape proposals: verification keeps the output exact.
  kernels::Bf16Math bf16_math = kernels::Bf16Math::kExact;

  // x: [n_rows, n_in] f32 -> [n_rows, n_out] f32
  torch::Tensor forward(const torch::Tensor& x) const;
  // The same product on the CPU without tensors: y [m, n_out] = x [m, n_in] @ W^T (+ bias), f32
  // rows at raw pointers, any m (bf16/f16/f32 weights in pieces of kSmallBatchRows), CPU weights
  // (not tensor_ops unless quantized). forward() runs its kernel cases through it; the decoder
  // layers' rows path calls it directly, 113 times per step of the Qwen3-0.6B shape, where
  // forward()'s reshapes, views and allocations cost ~0.5 ms of a ~10 ms q4_0 decode step on the
  // main thread while the other thread waits.
  void forward_rows(const float* x,  // [m, n_in]
                    int64_t m,
                    float* y) const;  // [m, n_out]
  // Whether forward(x) runs the streaming kernels (forward_rows) rather than libtorch.
  bool runs_kernels(const torch::Tensor& x) const;
  int64_t n_out() const { return quantized.defined() ? quantized.n_out : weight.size(0); }
  int64_t n_in() const { return quantized.defined() ? quantized.n_in : weight.size(1); }
  // Replaces `weight` by its Q8_0 / Q4_0 quantization (name: for error messages).
  void quantize(kernels::QuantType type, const std::string& name);
};

// The streaming kernel's name for a weight's dtype (f32, f16 or bf16; anything else asserts).
kernels::WeightDType kernel_weight_dtype(const torch::Tensor& weight);

}  // namespace dspark::model
