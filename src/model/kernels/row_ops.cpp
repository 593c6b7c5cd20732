#include "model/kernels/row_ops.h"

#include <cmath>

namespace dspark::kernels {

namespace {

void rms_norm_row(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  float sum_sq = 0.0f;
  for (int64_t i = 0; i < dim; ++i) sum_sq += x[i] * x[i];
  const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) out[i] = x[i] * inv_rms * weight[i];
}

}  // namespace

void rms_norm_rows(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) rms_norm_row(x + r * dim, weight, dim, eps, out + r * dim);
}

void norm_rope_heads(float* x, int64_t n_rows, int64_t row_stride, int64_t n_heads, int64_t head_dim, const float* norm_weight,
                     float eps, const float* cos, const float* sin) {
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* c = cos + r * head_dim;
    const float* s = sin + r * head_dim;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + r * row_stride + h * head_dim;
      if (norm_weight != nullptr) rms_norm_row(v, norm_weight, head_dim, eps, v);
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i + half] + a * s[i + half];
      }
    }
  }
}

void silu_mul_rows(const float* gate_up, int64_t n_rows, int64_t n_inner, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* gate = gate_up + r * 2 * n_inner;
    const float* up = gate + n_inner;
    float* o = out + r * n_inner;
    for (int64_t i = 0; i < n_inner; ++i) o[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }
}

void add_in_place(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace dspark::kernels
