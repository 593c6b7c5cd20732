// linear_quant (Q8_0 / Q4_0 weights) against a double-precision reference built from llama.cpp's
// own dequantization (model::dequantize_row) and its activation quantization, for every ISA
// variant this CPU supports; the variants against each other bit for bit; the packed layout's
// round trip.
//
// The kernel's only rounding is f32: each block's integer sum is exact, then acc += sum * (d_w d_x)
// in f32, block after block. Against the reference (the same quantized values, summed in double)
// the error is a few f32 roundings per block: measured against the dot product's natural scale
// sum |x_q w_q|, 1e-5 leaves margin, while dropping one block errs by ~1/blocks (>= 3e-2 here).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "model/ggml_quants.h"
#include "model/kernels/cpu_isa.h"
#include "model/kernels/kernel_test_util.h"
#include "model/kernels/linear_quant.h"
#include "model/safetensors.h"

namespace dspark::kernels {
namespace {

using testing::DispatchGuard;

constexpr double kTolerance = 1e-5;

model::GgmlType ggml_type(QuantType type) {
  return type == QuantType::kQ8_0 ? model::GgmlType::kQ8_0 : model::GgmlType::kQ4_0;
}
const char* type_name(QuantType type) { return type == QuantType::kQ8_0 ? "q8_0" : "q4_0"; }

// n rows of k values drawn from N(0, 1) with a few large outliers, quantized by llama.cpp's
// reference quantizer: [n, k / 32] blocks.
std::vector<uint8_t> random_blocks(QuantType type, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float& v : w) v = normal(rng) * (rng() % 17 == 0 ? 8.0f : 1.0f);
  std::vector<uint8_t> blocks(static_cast<size_t>(n) * (k / kQuantBlock) * quant_block_bytes(type));
  model::quantize_row(ggml_type(type), w.data(), blocks.data(), n * k);
  return blocks;
}

std::vector<uint8_t> packed(QuantType type, const std::vector<uint8_t>& blocks, int64_t n, int64_t k) {
  std::vector<uint8_t> out(packed_quant_bytes(type, n, k));
  pack_quant_rows(type, blocks.data(), n, k, out.data());
  return out;
}

// x quantized per block of 32 as the kernel does (llama.cpp's Q8_0: d = max|x| / 127 kept as f16,
// q = round(x / d) with the unrounded d), as values.
std::vector<double> quantized_activations(const std::vector<float>& x) {
  std::vector<double> out(x.size());
  for (size_t b = 0; b < x.size(); b += kQuantBlock) {
    float amax = 0;
    for (int64_t t = 0; t < kQuantBlock; ++t) amax = std::max(amax, std::fabs(x[b + t]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const double d16 = model::f16_to_f32(model::f32_to_f16(d));
    for (int64_t t = 0; t < kQuantBlock; ++t) out[b + t] = d16 * double(std::lround(x[b + t] * id));
  }
  return out;
}

struct Case {
  int64_t m, k, n;
};

// y = x @ dequant(w)^T with the kernel, and the largest error against the reference relative
// to sum |x_q w|.
double max_scaled_error(QuantType type, const Case& c, uint32_t seed) {
  const std::vector<uint8_t> blocks = random_blocks(type, c.n, c.k, seed);
  const std::vector<uint8_t> w = packed(type, blocks, c.n, c.k);
  const std::vector<float> x = testing::random_floats(static_cast<size_t>(c.m * c.k), -2.0f, 2.0f, seed + 1);
  std::vector<float> y(static_cast<size_t>(c.m * c.n));
  linear_quant(x.data(), c.m, c.k, w.data(), type, c.n, y.data(), c.n, false);

  std::vector<float> w_values(static_cast<size_t>(c.n * c.k));
  model::dequantize_row(ggml_type(type), blocks.data(), w_values.data(), c.n * c.k);
  const std::vector<double> xq = quantized_activations(x);
  double worst = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t r = 0; r < c.n; ++r) {
      double ref = 0, scale = 0;
      for (int64_t t = 0; t < c.k; ++t) {
        const double term = xq[i * c.k + t] * double(w_values[r * c.k + t]);
        ref += term;
        scale += std::fabs(term);
      }
      worst = std::max(worst, std::fabs(double(y[i * c.n + r]) - ref) / std::max(scale, 1e-30));
    }
  return worst;
}

const std::vector<Case> kCases = {{1, 32, 16},   {1, 1024, 96}, {2, 96, 40},  {3, 64, 17}, {5, 160, 33},
                                  {8, 256, 48},  {9, 128, 64},  {17, 64, 16}, {33, 96, 24}, {64, 64, 50}};

TEST(LinearQuant, MatchesTheReferenceOnEveryIsa) {
  DispatchGuard guard;
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0})
    for (Isa isa : available_isas()) {
      set_isa(isa);
      for (const Case& c : kCases) {
        const double error = max_scaled_error(type, c, static_cast<uint32_t>(c.m * 131 + c.k + c.n));
        EXPECT_LT(error, kTolerance) << type_name(type) << " " << isa_name(isa) << " m=" << c.m << " k=" << c.k
                                     << " n=" << c.n;
      }
    }
}

// Every variant computes the same integer sums and the same f32 operations in the same order, so
// their results are equal bit for bit; each row's result is the one it gets alone (m = 1), so a
// verify step's rows do not depend on how many drafts share the call.
TEST(LinearQuant, VariantsAgreeBitwiseAndRowsAreIndependent) {
  DispatchGuard guard;
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0}) {
    const Case c{13, 320, 40};
    const std::vector<uint8_t> w = packed(type, random_blocks(type, c.n, c.k, 7), c.n, c.k);
    const std::vector<float> x = testing::random_floats(static_cast<size_t>(c.m * c.k), -3.0f, 3.0f, 8);
    set_isa(Isa::kGeneric);
    std::vector<float> expected(static_cast<size_t>(c.m * c.n));
    linear_quant(x.data(), c.m, c.k, w.data(), type, c.n, expected.data(), c.n, false);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      std::vector<float> y(expected.size());
      linear_quant(x.data(), c.m, c.k, w.data(), type, c.n, y.data(), c.n, false);
      EXPECT_EQ(0, std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)))
          << type_name(type) << " " << isa_name(isa);
      for (int64_t i = 0; i < c.m; ++i) {
        std::vector<float> row(static_cast<size_t>(c.n));
        linear_quant(x.data() + i * c.k, 1, c.k, w.data(), type, c.n, row.data(), c.n, false);
        EXPECT_EQ(0, std::memcmp(row.data(), expected.data() + i * c.n, row.size() * sizeof(float)))
            << type_name(type) << " " << isa_name(isa) << " row " << i;
      }
    }
  }
}

// The activations' scale d = max|x| / 127 is kept as f16 on every ISA alike, also where it is an f16
// subnormal (below 6.1e-5) or rounds to zero (below 3e-8): rows of x scaled from 1 down to 1e-9, and
// a row of zeros, give every variant the generic one's bits.
TEST(LinearQuant, TinyActivationsTakeTheSameF16ScaleOnEveryIsa) {
  DispatchGuard guard;
  const Case c{11, 96, 20};
  std::vector<float> x = testing::random_floats(static_cast<size_t>(c.m * c.k), -1.0f, 1.0f, 21);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t t = 0; t < c.k; ++t) x[i * c.k + t] *= i == c.m - 1 ? 0.0f : std::pow(10.0f, -float(i));
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0}) {
    const std::vector<uint8_t> w = packed(type, random_blocks(type, c.n, c.k, 22), c.n, c.k);
    set_isa(Isa::kGeneric);
    std::vector<float> expected(static_cast<size_t>(c.m * c.n));
    linear_quant(x.data(), c.m, c.k, w.data(), type, c.n, expected.data(), c.n, false);
    EXPECT_NE(expected[5 * c.n], 0.0f);              // 1e-5: an f16 subnormal scale, not zero
    EXPECT_EQ(expected[(c.m - 1) * c.n], 0.0f);      // the zero row
    for (Isa isa : available_isas()) {
      set_isa(isa);
      std::vector<float> y(expected.size());
      linear_quant(x.data(), c.m, c.k, w.data(), type, c.n, y.data(), c.n, false);
      EXPECT_EQ(0, std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)))
          << type_name(type) << " " << isa_name(isa);
    }
  }
}

// The activations round as llama.cpp's quantize_row_q8_0_ref does (roundf: halves away from zero,
// values just below a half down): one block whose max is 127 (so 1 / d is exactly 1) holds exact
// halves of both signs and their float neighbours; the weights are the identity (one 127 per
// row), so each output is that row's rounded activation times the two f16 scales.
TEST(LinearQuant, ActivationsRoundHalvesAwayFromZeroLikeLlamaCpp) {
  DispatchGuard guard;
  constexpr int64_t k = kQuantBlock, n = kQuantBlock;
  std::vector<float> x(k);
  x[0] = 127.0f;
  for (int64_t t = 1; t < k; ++t) {
    const float half = static_cast<float>(t / 3) * 4.0f + 0.5f;
    const float v = t % 3 == 0 ? half : t % 3 == 1 ? std::nextafter(half, 0.0f) : std::nextafter(half, 200.0f);
    x[t] = t % 2 ? -v : v;
  }
  std::vector<float> identity(static_cast<size_t>(n * k), 0.0f);
  for (int64_t r = 0; r < n; ++r) identity[r * k + r] = 1.0f;
  std::vector<uint8_t> w_blocks(static_cast<size_t>(n) * quant_block_bytes(QuantType::kQ8_0));
  model::quantize_row(model::GgmlType::kQ8_0, identity.data(), w_blocks.data(), n * k);
  std::vector<uint8_t> x_block(quant_block_bytes(QuantType::kQ8_0));
  model::quantize_row(model::GgmlType::kQ8_0, x.data(), x_block.data(), k);
  const auto scale = [](const uint8_t* block) {
    uint16_t bits;
    std::memcpy(&bits, block, 2);
    return model::f16_to_f32(bits);
  };
  const float dx = scale(x_block.data());
  const auto* xq = reinterpret_cast<const int8_t*>(x_block.data() + 2);
  const std::vector<uint8_t> w = packed(QuantType::kQ8_0, w_blocks, n, k);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    std::vector<float> y(n);
    linear_quant(x.data(), 1, k, w.data(), QuantType::kQ8_0, n, y.data(), n, false);
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* wb = w_blocks.data() + r * quant_block_bytes(QuantType::kQ8_0);
      const int32_t sum = int32_t{reinterpret_cast<const int8_t*>(wb + 2)[r]} * xq[r];
      EXPECT_EQ(y[r], static_cast<float>(sum) * (scale(wb) * dx)) << isa_name(isa) << " x=" << x[r];
      EXPECT_EQ(xq[r], static_cast<int8_t>(std::roundf(x[r]))) << x[r];
    }
  }
}

// accumulate adds into y's rows, ldy apart, and leaves the columns past n alone.
TEST(LinearQuant, AccumulatesIntoStridedRows) {
  DispatchGuard guard;
  const Case c{3, 64, 24};
  const int64_t ldy = 40;
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0})
    for (Isa isa : available_isas()) {
      set_isa(isa);
      const std::vector<uint8_t> w = packed(type, random_blocks(type, c.n, c.k, 3), c.n, c.k);
      const std::vector<float> x = testing::random_floats(static_cast<size_t>(c.m * c.k), -1.0f, 1.0f, 4);
      std::vector<float> plain(static_cast<size_t>(c.m * c.n));
      linear_quant(x.data(), c.m, c.k, w.data(), type, c.n, plain.data(), c.n, false);
      std::vector<float> y(static_cast<size_t>(c.m * ldy), 0.5f);
      linear_quant(x.data(), c.m, c.k, w.data(), type, c.n, y.data(), ldy, true);
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t col = 0; col < ldy; ++col) {
          const float expected = col < c.n ? 0.5f + plain[i * c.n + col] : 0.5f;
          EXPECT_EQ(y[i * ldy + col], expected) << isa_name(isa) << " " << i << "," << col;
        }
    }
}

// Packing and unpacking give back llama.cpp's blocks, and a packed row dequantizes to what
// model::dequantize_row makes of the original; n need not be a multiple of 16.
TEST(LinearQuant, PackedRowsRoundTrip) {
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0}) {
    const int64_t n = 21, k = 96;
    const std::vector<uint8_t> blocks = random_blocks(type, n, k, 11);
    const std::vector<uint8_t> w = packed(type, blocks, n, k);
    EXPECT_EQ(w.size(), 32u * (k / kQuantBlock) * quant_block_bytes(type));  // two groups of 16 rows
    const size_t row_bytes = (k / kQuantBlock) * quant_block_bytes(type);
    for (int64_t r = 0; r < n; ++r) {
      std::vector<uint8_t> row(row_bytes);
      unpack_quant_row(type, w.data(), n, k, r, row.data());
      EXPECT_EQ(0, std::memcmp(row.data(), blocks.data() + r * row_bytes, row_bytes)) << type_name(type) << " " << r;
      std::vector<float> got(static_cast<size_t>(k)), expected(static_cast<size_t>(k));
      dequantize_packed_row(type, w.data(), n, k, r, got.data());
      model::dequantize_row(ggml_type(type), blocks.data() + r * row_bytes, expected.data(), k);
      EXPECT_EQ(got, expected) << type_name(type) << " " << r;
    }
  }
}

// What quantization costs against f32 weights and activations (normal, k = 1024, 256 outputs): the
// relative RMS error of y, weights and activations quantized both, measured 0.0085 for Q8_0 and
// 0.098 for Q4_0; the thresholds catch a scale read from the wrong block or a nibble order swapped
// (errors of order 1).
TEST(LinearQuant, ErrorAgainstF32WeightsIsThatOfTheFormat) {
  const int64_t m = 4, k = 1024, n = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n * k)), x(static_cast<size_t>(m * k));
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  for (QuantType type : {QuantType::kQ8_0, QuantType::kQ4_0}) {
    std::vector<uint8_t> blocks(static_cast<size_t>(n) * (k / kQuantBlock) * quant_block_bytes(type));
    model::quantize_row(ggml_type(type), w.data(), blocks.data(), n * k);
    const std::vector<uint8_t> wp = packed(type, blocks, n, k);
    std::vector<float> y(static_cast<size_t>(m * n));
    linear_quant(x.data(), m, k, wp.data(), type, n, y.data(), n, false);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < n; ++r) {
        double ref = 0;
        for (int64_t t = 0; t < k; ++t) ref += double(x[i * k + t]) * double(w[r * k + t]);
        err += (y[i * n + r] - ref) * (y[i * n + r] - ref);
        norm += ref * ref;
      }
    const double relative = std::sqrt(err / norm);
    std::printf("%s: relative RMS error %.4f\n", type_name(type), relative);
    EXPECT_LT(relative, type == QuantType::kQ8_0 ? 0.015 : 0.15) << type_name(type);
    EXPECT_GT(relative, type == QuantType::kQ8_0 ? 0.001 : 0.03) << type_name(type);  // it is quantized
  }
}

TEST(LinearQuant, RowsOfPartialBlocksAreAnError) {
  EXPECT_THROW(packed_quant_bytes(QuantType::kQ8_0, 16, 48), Error);
}

}  // namespace
}  // namespace dspark::kernels
