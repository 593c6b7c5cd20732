// The fused element-wise ops of the CPU fast path against straightforward double references, on
// every SIMD variant this CPU runs, at widths that take the vector loop, the scalar tail, or both.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

uint16_t bf16_bits(float x) {  // round to nearest even (the test values are finite)
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float from_bf16(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// y += a W^T with W stored transposed: every output equals, bit for bit, the f32 multiply-add
// chain over j in order, fused on the SIMD variants and not on the portable one (the vector blocks,
// the scalar tail and the two threads' column shares all sum that way), the chain is within 1e-5 relative of a double reference, and the padding
// past n in each row of y is untouched. n 5 runs the tail only, 64 the blocks only, 67 both, and 4133
// is past the two-thread split (2 x 2048 columns).
template <class T>
void check_add_combination(int64_t n, std::vector<T> w, const std::vector<float>& w_values) {
  const bool fused = current_isa() != Isa::kGeneric;
  const int64_t m = 3, r = 17, ldw = n + 3, ldy = n + 5;
  const auto a = random_values(m * r, 9);
  auto y = random_values(m * ldy, 10);
  const auto before = y;
  add_combination(y.data(), ldy, a.data(), m, r, w.data(), ldw, n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t v = 0; v < n; ++v) {
      float chain = before[i * ldy + v];
      double exact = chain, magnitude = std::abs(chain);
      for (int64_t j = 0; j < r; ++j) {
        const float product = a[i * r + j] * w_values[j * ldw + v];  // this file has no -mfma: not contracted
        chain = fused ? std::fma(a[i * r + j], w_values[j * ldw + v], chain) : product + chain;
        exact += double(a[i * r + j]) * w_values[j * ldw + v];
        magnitude += std::abs(double(a[i * r + j]) * w_values[j * ldw + v]);
      }
      ASSERT_EQ(y[i * ldy + v], chain) << "row " << i << " column " << v;
      ASSERT_NEAR(y[i * ldy + v], exact, 1e-5 * magnitude);
    }
    for (int64_t v = n; v < ldy; ++v) ASSERT_EQ(y[i * ldy + v], before[i * ldy + v]);
  }
}

TEST(RowOps, AddCombinationF32IsTheOrderedChain) {
  for_each_isa_and_size({5, 64, 67, 4133}, "n", [](int64_t n) {
    const auto w = random_values(17 * (n + 3), 11);
    check_add_combination(n, w, w);
  });
}

TEST(RowOps, AddCombinationBf16IsTheOrderedChain) {
  for_each_isa_and_size({5, 64, 67, 4133}, "n", [](int64_t n) {
    const auto values = random_values(17 * (n + 3), 12);
    std::vector<uint16_t> bits(values.size());
    std::vector<float> rounded(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      bits[i] = bf16_bits(values[i]);
      rounded[i] = from_bf16(bits[i]);
    }
    check_add_combination(n, bits, rounded);
  });
}

}  // namespace
}  // namespace dspark::kernels
