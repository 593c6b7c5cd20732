// The fused element-wise ops of the CPU fast path against straightforward double references.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/kernels/row_ops.h"

namespace dspark::kernels {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(RowOps, RmsNormMatchesReference) {
  const int64_t rows = 3, dim = 37;
  const auto x = random_values(rows * dim, 1), w = random_values(dim, 2);
  std::vector<float> out(rows * dim);
  rms_norm_rows(x.data(), w.data(), rows, dim, 1e-6f, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
    for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(out[r * dim + i], x[r * dim + i] * inv * w[i], 1e-5);
  }
}

// Rotate-half RoPE with q/k norm on strided rows; the values past the heads are left untouched.
TEST(RowOps, NormRopeHeadsMatchesReference) {
  const int64_t rows = 2, heads = 3, hd = 8, stride = heads * hd + 5;
  auto x = random_values(rows * stride, 3);
  const auto original = x, w = random_values(hd, 4);
  std::vector<float> cos(rows * hd), sin(rows * hd);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < hd; ++i) {
      const double angle = (r + 3) * std::pow(10000.0, -2.0 * (i % (hd / 2)) / hd);
      cos[r * hd + i] = static_cast<float>(std::cos(angle));
      sin[r * hd + i] = static_cast<float>(std::sin(angle));
    }
  norm_rope_heads(x.data(), rows, stride, heads, hd, w.data(), 1e-6f, cos.data(), sin.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = original.data() + r * stride + h * hd;
      double ss = 0;
      for (int64_t i = 0; i < hd; ++i) ss += double(in[i]) * in[i];
      std::vector<double> n(hd);
      for (int64_t i = 0; i < hd; ++i) n[i] = in[i] / std::sqrt(ss / hd + 1e-6) * w[i];
      for (int64_t i = 0; i < hd; ++i) {
        const double rotated = i < hd / 2 ? -n[i + hd / 2] : n[i - hd / 2];
        EXPECT_NEAR(x[r * stride + h * hd + i], n[i] * cos[r * hd + i] + rotated * sin[r * hd + i], 1e-5);
      }
    }
    for (int64_t i = heads * hd; i < stride; ++i) EXPECT_EQ(x[r * stride + i], original[r * stride + i]);
  }
}

TEST(RowOps, SiluMulMatchesReference) {
  const int64_t rows = 2, inner = 11;
  const auto gu = random_values(rows * 2 * inner, 5);
  std::vector<float> out(rows * inner);
  silu_mul_rows(gu.data(), rows, inner, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < inner; ++i) {
      const double g = gu[r * 2 * inner + i], u = gu[r * 2 * inner + inner + i];
      EXPECT_NEAR(out[r * inner + i], g / (1 + std::exp(-g)) * u, 1e-5);
    }
}

}  // namespace
}  // namespace dspark::kernels
