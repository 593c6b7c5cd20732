#include "model/linear.h"

#include <algorithm>

#include "common/error.h"
#include "model/kernels/linear_quant.h"

namespace dspark::model {

kernels::WeightDType kernel_weight_dtype(const torch::Tensor& weight) {
  switch (weight.scalar_type()) {
    case torch::kFloat32: return kernels::WeightDType::kF32;
    case torch::kBFloat16: return kernels::WeightDType::kBF16;
    case torch::kFloat16: return kernels::WeightDType::kF16;
    default: DSPARK_ASSERT(false);
  }
}

namespace {

bool kernel_dtype(const torch::Tensor& weight) {
  return weight.scalar_type() == torch::kFloat32 || weight.scalar_type() == torch::kBFloat16 ||
         weight.scalar_type() == torch::kFloat16;
}

// The streaming kernel can serve x @ weight^T: CPU tensors, no autograd, a kernel dtype.
bool kernel_call(const torch::Tensor& x, const torch::Tensor& weight) {
  const bool needs_grad = torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
  return x.is_cpu() && weight.is_cpu() && !needs_grad && x.dim() == 2 && kernel_dtype(weight);
}

}  // namespace

torch::Tensor Linear::forward(const torch::Tensor& x) const {
  if (quantized.defined()) {
    const bool needs_grad = torch::GradMode::is_enabled() && x.requires_grad();
    torch::Tensor y;
    if (!needs_grad && x.is_cpu()) {
      std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
      shape.back() = n_out();
      y = quantized.forward(x.reshape({-1, n_in()})).view(shape);
    } else {
      y = torch::linear(x, quantized.dequantize().to(x.device()));
    }
    return bias.defined() ? y.add_(bias) : y;
  }
  if (!tensor_ops && kernel_call(x, weight) &&
      (x.size(0) <= kSmallBatchRows || weight.scalar_type() != torch::kFloat32)) {
    const torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty({xc.size(0), n_out()}, xc.options());
    const float* x_rows = xc.data_ptr<float>();
    float* y_rows = y.data_ptr<float>();
    for (int64_t row = 0; row < xc.size(0); row += kSmallBatchRows) {
      const int64_t rows = std::min(kSmallBatchRows, xc.size(0) - row);
      kernels::linear_small(x_rows + row * n_in(), rows, n_in(), weight.data_ptr(), kernel_weight_dtype(weight), n_out(),
                            y_rows + row * n_out(), bf16_math);
    }
    if (bias.defined()) y.add_(bias);
    return y;
  }
  // Autograd, other devices, or more rows of f32 weights than the kernel is for: libtorch.
  // Upcasting a bf16 or f16 weight per call keeps the result exact.
  torch::Tensor w = weight.scalar_type() == torch::kFloat32 ? weight : weight.to(torch::kFloat32);
  return bias.defined() ? torch::linear(x, w, bias) : torch::linear(x, w);
}

void Linear::forward_rows(const float* x, int64_t m, float* y) const {
  DSPARK_ASSERT(m >= 0 && m <= kSmallBatchRows && !tensor_ops);
  if (quantized.defined()) {
    kernels::linear_quant(x, m, n_in(), quantized.packed.data_ptr(), quantized.type, n_out(), y, n_out(), false);
  } else {
    DSPARK_ASSERT(weight.is_cpu() && kernel_dtype(weight));
    kernels::linear_small(x, m, n_in(), weight.data_ptr(), kernel_weight_dtype(weight), n_out(), y, bf16_math);
  }
  if (!bias.defined()) return;
  const float* b = bias.data_ptr<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n_out(); ++j) y[i * n_out() + j] += b[j];
}

void Linear::quantize(kernels::QuantType type, const std::string& name) {
  quantized = QuantizedWeight::quantize(weight, type, name);
  weight = torch::Tensor();
}

}  // namespace dspark::model
