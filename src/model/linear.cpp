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

bool Linear::runs_kernels(const torch::Tensor& x) const {
  if (quantized.defined()) return x.is_cpu() && !(torch::GradMode::is_enabled() && x.requires_grad());
  return !tensor_ops && kernel_call(x, weight) && (x.size(0) <= kSmallBatchRows || weight.scalar_type() != torch::kFloat32);
}

torch::Tensor Linear::forward(const torch::Tensor& x) const {
  if (runs_kernels(x)) {
    const torch::Tensor xc = x.reshape({-1, n_in()}).to(torch::kFloat32).contiguous();
    torch::Tensor y = torch::empty({xc.size(0), n_out()}, xc.options());
    forward_rows(xc.data_ptr<float>(), xc.size(0), y.data_ptr<float>());
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = n_out();
    return y.view(shape);
  }
  if (quantized.defined()) {
    torch::Tensor y = torch::linear(x, quantized.dequantize().to(x.device()));
    return bias.defined() ? y.add_(bias) : y;
  }
  // Autograd, other devices, or more rows of f32 weights than the kernel is for: libtorch.
  // Upcasting a bf16 or f16 weight per call keeps the result exact.
  torch::Tensor w = weight.scalar_type() == torch::kFloat32 ? weight : weight.to(torch::kFloat32);
  return bias.defined() ? torch::linear(x, w, bias) : torch::linear(x, w);
}

void Linear::forward_rows(const float* x, int64_t m, float* y) const {
  const int64_t n = n_out(), k = n_in();
  DSPARK_ASSERT(m >= 0);
  if (quantized.defined()) {
    kernels::linear_quant(x, m, k, quantized.packed.data_ptr(), quantized.type, n, y, n, false);
  } else {
    DSPARK_ASSERT(!tensor_ops && weight.is_cpu() && kernel_dtype(weight));
    for (int64_t row = 0; row < m; row += kSmallBatchRows) {
      const int64_t rows = std::min(kSmallBatchRows, m - row);
      kernels::linear_small(x + row * k, rows, k, weight.data_ptr(), kernel_weight_dtype(weight), n, y + row * n,
                            bf16_math);
    }
  }
  if (!bias.defined()) return;
  const float* b = bias.data_ptr<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[i * n + j] += b[j];
}

void Linear::quantize(kernels::QuantType type, const std::string& name) {
  quantized = QuantizedWeight::quantize(weight, type, name);
  weight = torch::Tensor();
}

}  // namespace dspark::model
