#include "model/rope.h"

#include <cmath>

namespace dspark::model {

namespace {

// llama3 rope_scaling: long wavelengths are divided by `factor`, short ones kept, and the band in
// between interpolated smoothly (Meta's Llama 3.1 recipe).
double llama3_scaled(double inv_freq, const RopeScaling& s) {
  const double low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  const double wavelen = 2.0 * M_PI / inv_freq;
  if (wavelen < high_freq_wavelen) return inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / s.factor;
  const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

}  // namespace

Rope::Rope(const ModelConfig& config) {
  const int64_t half = config.head_dim / 2;
  std::vector<double> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    // Computed in f32 like the reference implementations, so angles agree at long positions.
    const float f = 1.0f / std::pow(static_cast<float>(config.rope_theta),
                                    static_cast<float>(2 * i) / static_cast<float>(config.head_dim));
    inv_freq[i] = config.rope_scaling.type == "llama3" ? llama3_scaled(f, config.rope_scaling) : f;
    if (!config.rope_freq_factors.empty()) inv_freq[i] /= config.rope_freq_factors[i];
  }
  inv_freq_ = torch::tensor(inv_freq, torch::kFloat64);
}

std::pair<torch::Tensor, torch::Tensor> Rope::cos_sin(const torch::Tensor& positions) const {
  torch::Tensor inv = inv_freq_.to(positions.device());
  torch::Tensor angles = positions.to(torch::kFloat64).unsqueeze(1) * inv.unsqueeze(0);  // [n, half]
  angles = torch::cat({angles, angles}, 1).unsqueeze(1);                                  // [n, 1, dim]
  return {angles.cos().to(torch::kFloat32), angles.sin().to(torch::kFloat32)};
}

std::pair<torch::Tensor, torch::Tensor> Rope::cos_sin_rows(const std::vector<int64_t>& positions) const {
  const int64_t n = static_cast<int64_t>(positions.size()), half = inv_freq_.size(0), dim = 2 * half;
  torch::Tensor cos = torch::empty({n, dim}), sin = torch::empty({n, dim});
  const double* inv = inv_freq_.data_ptr<double>();
  float* c = cos.data_ptr<float>();
  float* s = sin.data_ptr<float>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[r]) * inv[i];
      c[r * dim + i] = c[r * dim + half + i] = static_cast<float>(std::cos(angle));
      s[r * dim + i] = s[r * dim + half + i] = static_cast<float>(std::sin(angle));
    }
  return {cos, sin};
}

torch::Tensor Rope::apply(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  torch::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

torch::Tensor Rope::apply(const torch::Tensor& x, const torch::Tensor& positions) const {
  auto [cos, sin] = cos_sin(positions);
  return apply(x, cos, sin);
}

}  // namespace dspark::model
