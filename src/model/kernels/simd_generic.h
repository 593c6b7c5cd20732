// The portable "SIMD" policy: one float per register, the same operations as simd_avx2.h and
// simd_avx512.h, for CPUs without AVX2 and sizes the SIMD variants do not handle.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "model/kernels/bf16.h"

namespace dspark::kernels {
namespace {

struct Scalar {
  using Reg = float;
  static constexpr int kWidth = 1;
  static constexpr int kMaxRowRegs = 0;
  static constexpr int kAccumulators = 8;
  static Reg zero() { return 0.0f; }
  static Reg load(const float* p) { return *p; }
  static Reg load_bf16(const uint16_t* p) { return bf16_to_f32(*p); }
  static void store(float* p, Reg v) { *p = v; }
  static Reg broadcast(float x) { return x; }
  static Reg add(Reg a, Reg b) { return a + b; }
  static Reg sub(Reg a, Reg b) { return a - b; }
  static Reg mul(Reg a, Reg b) { return a * b; }
  static Reg div(Reg a, Reg b) { return a / b; }
  static Reg fmadd(Reg a, Reg b, Reg c) { return a * b + c; }
  static Reg max(Reg a, Reg b) { return std::max(a, b); }
  static float reduce_add(Reg v) { return v; }
  static float reduce_max(Reg v) { return v; }
  static Reg exp(Reg x) { return std::exp(x); }
  static Reg sum_each(const Reg (&acc)[kWidth]) { return acc[0]; }
};

}  // namespace
}  // namespace dspark::kernels
