// The fused element-wise ops of the CPU fast path against straightforward double references, on
// every SIMD variant this CPU runs, at widths that take the vector loop, the scalar tail, or both.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "model/kernels/row_ops.h"

namespace dspark::kernels {
namespace {

using testing::DispatchGuard;

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs check(size) for every size on every ISA variant this CPU runs, restoring the choice after.
template <class Check>
void for_each_isa_and_size(std::initializer_list<int64_t> sizes, const char* size_name, Check check) {
  DispatchGuard guard;
  for (Isa isa : available_isas()) {
    set_isa(isa);
    for (int64_t size : sizes) {
      SCOPED_TRACE(std::string("isa=") + isa_name(isa) + ", " + size_name + " " + std::to_string(size));
      check(size);
    }
  }
}

TEST(RowOps, RmsNormMatchesReference) {
  for_each_isa_and_size({37, 1024}, "dim", [](int64_t dim) {
    const int64_t rows = 3;
    const auto x = random_values(rows * dim, 1), w = random_values(dim, 2);
    std::vector<float> out(rows * dim);
    rms_norm_rows(x.data(), w.data(), rows, dim, 1e-6f, out.data());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
      for (int64_t i = 0; i < dim; ++i) ASSERT_NEAR(out[r * dim + i], x[r * dim + i] * inv * w[i], 1e-5);
    }
  });
}

// Rotate-half RoPE with q/k norm on strided rows; the values past the heads are left untouched.
// head_dim 8 runs the scalar tail only, 40 both paths (half = 20), 128 the vector loop only.
TEST(RowOps, NormRopeHeadsMatchesReference) {
  for_each_isa_and_size({8, 40, 128}, "head_dim", [](int64_t hd) {
    const int64_t rows = 2, heads = 3, stride = heads * hd + 5;
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
          ASSERT_NEAR(x[r * stride + h * hd + i], n[i] * cos[r * hd + i] + rotated * sin[r * hd + i], 1e-5);
        }
      }
      for (int64_t i = heads * hd; i < stride; ++i) ASSERT_EQ(x[r * stride + i], original[r * stride + i]);
    }
  });
}

// Gates span [-100, 100] so exp(-g) overflows f32 at one end and vanishes at the other.
TEST(RowOps, SiluMulMatchesReference) {
  for_each_isa_and_size({11, 100}, "inner", [](int64_t inner) {
    const int64_t rows = 2;
    auto gu = random_values(rows * 2 * inner, 5);
    for (int64_t i = 0; i < inner; ++i) gu[i] = -100.0f + 200.0f * static_cast<float>(i) / (inner - 1);
    std::vector<float> out(rows * inner);
    silu_mul_rows(gu.data(), rows, inner, out.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < inner; ++i) {
        const double g = gu[r * 2 * inner + i], u = gu[r * 2 * inner + inner + i];
        const double expected = g / (1 + std::exp(-g)) * u;
        ASSERT_NEAR(out[r * inner + i], expected, 1e-5 + 1e-6 * std::abs(expected));
      }
  });
}

TEST(RowOps, AddInPlaceAddsEveryElement) {
  for_each_isa_and_size({5, 64, 67}, "n", [](int64_t n) {
    auto x = random_values(n, 6);
    const auto before = x, y = random_values(n, 7);
    add_in_place(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], before[i] + y[i]);
  });
}

}  // namespace
}  // namespace dspark::kernels
