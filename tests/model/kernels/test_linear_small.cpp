// linear_small against a double-precision reference, for every ISA variant this CPU supports,
// every weight dtype (f32, bf16, f16) and both bf16 math modes.
//
// Errors are measured against the natural scale of a dot product, sum_i |x_i w_i| (a relative
// error on y itself is meaningless when terms cancel):
//  - exact modes (f32 weights, bf16 and f16 weights widened exactly): only f32 summation differs from the
//    reference; 16-lane accumulation of k <= ~1000 terms stays around 1e-7..1e-6, so 1e-5 leaves
//    margin. A kernel that drops or duplicates one term errs by ~1/k of the scale (>= 1e-3 here),
//    and one that rounds activations to bf16 by ~2^-9 / sqrt(k) (~6e-5 at k = 1029, more for
//    smaller k; ExactToleranceRejectsBf16Activations checks that this is caught).
//  - kDotBf16: activations are rounded to bf16 (relative error <= 2^-9 each), so against the f32
//    reference the error can reach 2^-9 of the scale; we allow 4e-3 (2^-8). Against a reference
//    that rounds x to bf16 itself, only summation remains and 1e-5 applies again, which also pins
//    the rounding mode (truncation instead of round-to-nearest-even would fail it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "model/kernels/bf16.h"
#include "model/kernels/cpu_isa.h"
#include "model/kernels/kernel_test_util.h"
#include "model/kernels/linear_small.h"
#include "model/safetensors.h"

namespace dspark::kernels {
namespace {

using testing::DispatchGuard;
using testing::random_floats;

constexpr double kExactTolerance = 1e-5;
constexpr double kDotBf16Tolerance = 4e-3;

struct Shape {
  int64_t m, k, n;
};

// k with and without tails of 16/32; n around the 8-row blocks and large enough to use threads.
std::vector<Shape> shapes() {
  const int64_t ms[] = {1, 2, 3, 7, 8, 9, 16, 33, 64};
  const std::pair<int64_t, int64_t> kns[] = {{1, 1},     {7, 3},     {16, 16},  {17, 9},
                                             {31, 33},   {32, 64},   {33, 17},  {100, 70},
                                             {257, 131}, {1029, 43}, {64, 1030}};
  std::vector<Shape> result;
  for (int64_t m : ms) {
    for (auto [k, n] : kns) result.push_back({m, k, n});
  }
  return result;
}

// Weights of one shape in a 16-bit dtype (bf16 or f16) and in f32; the f32 copy holds the 16-bit
// values exactly, so both share one reference.
struct Operands {
  WeightDType narrow = WeightDType::kBF16;  // the dtype of w_16
  std::vector<float> x;        // [m, k]
  std::vector<uint16_t> w_16;  // [n, k]
  std::vector<float> w_f32;    // [n, k], the same values
  // One element of slack in front so the data does not start on a vector boundary.
  const float* x_ptr() const { return x.data() + 1; }
  const uint16_t* w_16_ptr() const { return w_16.data() + 1; }
  const float* w_f32_ptr() const { return w_f32.data() + 1; }
  const void* w(WeightDType dtype) const {
    return dtype == WeightDType::kF32 ? static_cast<const void*>(w_f32_ptr()) : static_cast<const void*>(w_16_ptr());
  }
};

// f16 weights include values in f16's subnormal range (every 7th one scaled by 2^-16, below
// 2^-14), which the conversion must widen exactly too.
Operands make_operands(const Shape& s, uint32_t seed, WeightDType narrow = WeightDType::kBF16) {
  Operands o;
  o.narrow = narrow;
  o.x = random_floats(static_cast<size_t>(s.m * s.k + 1), -2.0f, 2.0f, seed);
  const std::vector<float> w =
      random_floats(static_cast<size_t>(s.n * s.k + 1), -1.0f, 1.0f, seed + 1);
  for (size_t i = 0; i < w.size(); ++i) {
    if (narrow == WeightDType::kF16) {
      o.w_16.push_back(model::f32_to_f16(i % 7 == 3 ? std::ldexp(w[i], -16) : w[i]));
      o.w_f32.push_back(model::f16_to_f32(o.w_16.back()));
    } else {
      o.w_16.push_back(f32_to_bf16(w[i]));
      o.w_f32.push_back(bf16_to_f32(o.w_16.back()));
    }
  }
  return o;
}

const char* dtype_name(WeightDType dtype) {
  return dtype == WeightDType::kF32 ? "f32" : dtype == WeightDType::kBF16 ? "bf16" : "f16";
}

struct Reference {
  std::vector<double> y;      // [m, n]
  std::vector<double> scale;  // [m, n]: sum_i |x_i w_i|
};

// round_x: multiply with x rounded to bf16, as kDotBf16 does.
Reference reference(const Shape& s, const Operands& o, bool round_x) {
  Reference r{std::vector<double>(s.m * s.n), std::vector<double>(s.m * s.n)};
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      double sum = 0, scale = 0;
      for (int64_t t = 0; t < s.k; ++t) {
        float xv = o.x_ptr()[i * s.k + t];
        if (round_x) xv = bf16_to_f32(f32_to_bf16(xv));
        const double term = double{xv} * o.w_f32_ptr()[j * s.k + t];
        sum += term;
        scale += std::fabs(term);
      }
      r.y[i * s.n + j] = sum;
      r.scale[i * s.n + j] = scale;
    }
  }
  return r;
}

// Largest |y - ref| / scale over the output.
double max_scaled_error(const std::vector<float>& y, const Reference& ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.y.size(); ++i) {
    const double err = std::fabs(y[i] - ref.y[i]) / std::max(ref.scale[i], 1e-30);
    worst = std::max(worst, std::isnan(err) ? 1e30 : err);
  }
  return worst;
}

// Runs the kernel into a buffer with sentinels after the output, checking they survive.
std::vector<float> run(const Shape& s, const Operands& o, WeightDType dtype, Bf16Math math = Bf16Math::kExact) {
  constexpr float kSentinel = 12345.0f;
  constexpr int64_t kGuard = 16;
  std::vector<float> y(static_cast<size_t>(s.m * s.n + kGuard), kSentinel);
  linear_small(o.x_ptr(), s.m, s.k, o.w(dtype), dtype, s.n, y.data(), math);
  for (int64_t i = 0; i < kGuard; ++i) EXPECT_EQ(y[s.m * s.n + i], kSentinel) << "wrote past y";
  y.resize(static_cast<size_t>(s.m * s.n));
  return y;
}

std::string describe(const Shape& s) {
  return "m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) + " n=" + std::to_string(s.n);
}

TEST(LinearSmall, EveryIsaAndModeMatchesReference) {
  DispatchGuard guard;
  uint32_t seed = 1;
  for (const Shape& s : shapes()) {
    const Operands o = make_operands(s, seed += 2);
    const Reference exact = reference(s, o, /*round_x=*/false);
    const Reference rounded_x = reference(s, o, /*round_x=*/true);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      for (Bf16Math math : {Bf16Math::kExact, Bf16Math::kDotBf16}) {
        SCOPED_TRACE(describe(s) + " isa=" + isa_name(isa) +
                     (math == Bf16Math::kExact ? " exact" : " dot_bf16"));
        EXPECT_LT(max_scaled_error(run(s, o, WeightDType::kF32, math), exact), kExactTolerance);
        const std::vector<float> y_bf16 = run(s, o, WeightDType::kBF16, math);
        const bool dot = math == Bf16Math::kDotBf16 && isa >= Isa::kAvx512Bf16;
        if (dot) {
          EXPECT_LT(max_scaled_error(y_bf16, rounded_x), kExactTolerance);
          EXPECT_LT(max_scaled_error(y_bf16, exact), kDotBf16Tolerance);
        } else {
          EXPECT_LT(max_scaled_error(y_bf16, exact), kExactTolerance);
        }
      }
    }
  }
}

// The exact tolerance must be tight enough to notice bf16-rounded activations, or the test above
// could not tell the two modes apart.
TEST(LinearSmall, ExactToleranceRejectsBf16Activations) {
  for (const Shape& s : {Shape{1, 1029, 43}, Shape{8, 257, 131}, Shape{4, 64, 1030}}) {
    const Operands o = make_operands(s, 99);
    const Reference exact = reference(s, o, false);
    const Reference rounded_x = reference(s, o, true);
    std::vector<float> y(rounded_x.y.begin(), rounded_x.y.end());
    EXPECT_GT(max_scaled_error(y, exact), kExactTolerance) << describe(s);
  }
}

// f16 weights, widened exactly in registers, give an f32 matmul of the same f16 values up to
// summation order: every ISA, every row count 1..64 (all register-tile shapes and their
// combinations past 8 rows), k with and without 8/16/32-element tails, n past one 48-column block.
// Bound: kExactTolerance of sum |x_i w_i| (see the top); a wrongly widened element (e.g. a
// subnormal flushed to zero or bf16-style bit shifting) misses by far more.
TEST(LinearSmall, F16WeightsEqualF32MatmulOfTheSameValues) {
  DispatchGuard guard;
  uint32_t seed = 501;
  for (int64_t m = 1; m <= 64; ++m) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{37, 53}, {64, 50}, {300, 97}}) {
      const Shape s{m, k, n};
      const Operands o = make_operands(s, seed += 2, WeightDType::kF16);
      const Reference exact = reference(s, o, /*round_x=*/false);
      for (Isa isa : available_isas()) {
        set_isa(isa);
        for (Bf16Math math : {Bf16Math::kExact, Bf16Math::kDotBf16}) {  // neither changes f16 math
          SCOPED_TRACE(describe(s) + " isa=" + isa_name(isa));
          const std::vector<float> y_f16 = run(s, o, WeightDType::kF16, math);
          ASSERT_LT(max_scaled_error(y_f16, exact), kExactTolerance);
          ASSERT_LT(max_scaled_error(run(s, o, WeightDType::kF32, math), exact), kExactTolerance);
        }
      }
    }
  }
}

// The f16 operands really hold subnormals and values that bf16 cannot hold, so the test above
// would notice f16 bits read as bf16 or subnormals flushed.
TEST(LinearSmall, F16OperandsExerciseSubnormalsAndTheMantissa) {
  const Operands o = make_operands(Shape{1, 64, 50}, 3, WeightDType::kF16);
  int subnormal = 0, beyond_bf16 = 0;
  for (float w : o.w_f32) {
    subnormal += w != 0 && std::fabs(w) < std::ldexp(1.0f, -14);
    beyond_bf16 += bf16_to_f32(f32_to_bf16(w)) != w;
  }
  EXPECT_GT(subnormal, 64 * 50 / 10);
  EXPECT_GT(beyond_bf16, 64 * 50 / 2);
}

// linear_small_accumulate adds into rows ldy apart and leaves the gaps between them alone: the
// DSpark Markov head adds W2 W1[x] into one slot's logits rows inside a [requests, block, vocab]
// tensor. y starts at known values y0, so y - y0 must match the reference like linear_small does.
TEST(LinearSmall, AccumulateAddsIntoStridedRows) {
  DispatchGuard guard;
  constexpr float kGap = -777.0f;
  uint32_t seed = 101;
  for (const Shape& s : {Shape{1, 32, 1030}, Shape{3, 64, 70}, Shape{9, 17, 131}})
  for (WeightDType narrow : {WeightDType::kBF16, WeightDType::kF16}) {
    const Operands o = make_operands(s, seed += 2, narrow);
    const Reference exact = reference(s, o, /*round_x=*/false);
    const int64_t ldy = s.n + 5;
    const std::vector<float> y0 = random_floats(static_cast<size_t>(s.m * ldy), -3.0f, 3.0f, seed + 7);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      for (WeightDType dtype : {WeightDType::kF32, narrow}) {
        SCOPED_TRACE(describe(s) + " isa=" + isa_name(isa) + " " + dtype_name(dtype));
        std::vector<float> y = y0;
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = s.n; j < ldy; ++j) y[i * ldy + j] = kGap;
        linear_small_accumulate(o.x_ptr(), s.m, s.k, o.w(dtype), dtype, s.n, y.data(), ldy, Bf16Math::kExact);
        std::vector<float> added(static_cast<size_t>(s.m * s.n));
        for (int64_t i = 0; i < s.m; ++i) {
          for (int64_t j = 0; j < s.n; ++j) added[i * s.n + j] = y[i * ldy + j] - y0[i * ldy + j];
          for (int64_t j = s.n; j < ldy; ++j) ASSERT_EQ(y[i * ldy + j], kGap) << "wrote between rows";
        }
        // y0 (|y0| <= 3) adds one rounding of its own size on top of the kernel's.
        EXPECT_LT(max_scaled_error(added, exact), kExactTolerance * 10);
      }
    }
  }
}

TEST(LinearSmall, ZeroKGivesZeros) {
  DispatchGuard guard;
  const float x[2] = {};
  const float w[3] = {};
  for (Isa isa : available_isas()) {
    set_isa(isa);
    std::vector<float> y(6, 7.0f);
    linear_small(x, 2, 0, w, WeightDType::kF32, 3, y.data());
    for (float v : y) EXPECT_EQ(v, 0.0f) << isa_name(isa);
  }
}

// Every variant must give the same numbers whether the call runs on one thread or is split.
TEST(LinearSmall, IndependentOfColumnSplit) {
  DispatchGuard guard;
  const Shape s{3, 200, 999};
  const Operands o = make_operands(s, 7);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    const std::vector<float> whole = run(s, o, WeightDType::kBF16);
    // Columns one at a time: the same weights, no thread split, tails everywhere.
    std::vector<float> by_column(s.m * s.n);
    for (int64_t j = 0; j < s.n; ++j) {
      std::vector<float> col(s.m);
      linear_small(o.x_ptr(), s.m, s.k, o.w_16_ptr() + j * s.k, WeightDType::kBF16, 1,
                   col.data());
      for (int64_t i = 0; i < s.m; ++i) by_column[i * s.n + j] = col[i];
    }
    const Reference exact = reference(s, o, false);
    EXPECT_LT(max_scaled_error(by_column, exact), kExactTolerance) << isa_name(isa);
    EXPECT_LT(max_scaled_error(whole, exact), kExactTolerance) << isa_name(isa);
  }
}

// A row's result must not depend on which other rows share the call: speculative decoding needs
// verify (m = 8) to reproduce decode (m = 1) bit for bit. The summation order per output is fixed
// by k alone, whatever the register tile, so exact equality is expected. k = 3000 makes the
// 8-row tile walk k in blocks (x does not fit L1 whole) while a single row does not; n = 101
// gives it two whole 48-column blocks and a partial one.
TEST(LinearSmall, RowsAreBitwiseIndependentOfBatch) {
  DispatchGuard guard;
  for (const Shape s : {Shape{9, 333, 70}, Shape{9, 3000, 101}})
  for (WeightDType narrow : {WeightDType::kBF16, WeightDType::kF16}) {
    const Operands o = make_operands(s, 11, narrow);
    for (Isa isa : available_isas()) {
      set_isa(isa);
      for (Bf16Math math : {Bf16Math::kExact, Bf16Math::kDotBf16}) {
        for (WeightDType dtype : {WeightDType::kF32, narrow}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + (math == Bf16Math::kExact ? " exact " : " dot ") + dtype_name(dtype));
          const std::vector<float> batch = run(s, o, dtype, math);
          for (int64_t i = 0; i < s.m; ++i) {
            std::vector<float> single(s.n);
            linear_small(o.x_ptr() + i * s.k, 1, s.k, o.w(dtype), dtype, s.n, single.data(), math);
            for (int64_t j = 0; j < s.n; ++j)
              ASSERT_EQ(single[j], batch[i * s.n + j]) << i << "," << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace dspark::kernels
