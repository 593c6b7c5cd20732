// Matrix multiply for the few rows of a decode / verify step: y = x @ w^T with w laid out like a
// torch Linear weight. A decode step is bound by streaming the weights from memory, so the kernel
// reads each weight row once for all m rows of x (x stays in cache) and shares the output columns
// between the OpenMP threads as contiguous runs of chunks (column_runs.h): each core streams its
// own part of w, and a core that finishes early takes the tail of another's run.
// Meant for m up to ~64 (above that a blocked GEMM reuses weights better), but correct for any m.
// The SIMD variant follows current_isa() (cpu_isa.h).
#pragma once
#include <cstdint>

namespace dspark::kernels {

enum class WeightDType {
  kF32,
  kBF16,  // stored as uint16_t: the upper half of an IEEE f32
  kF16,   // stored as uint16_t: IEEE binary16, widened to f32 in registers (exact, like bf16's
          // kExact; no Bf16Math applies)
};

// How bf16 weights are multiplied (f32 and f16 weights are unaffected).
enum class Bf16Math {
  // Weights widened to f32 in registers, activations kept in f32: the result equals an f32 matmul
  // of the same (bf16-valued) weights up to summation order. The default.
  kExact,
  // vdpbf16ps (AVX512_BF16 only; other ISAs fall back to kExact): activations rounded to bf16
  // once per call, products summed in f32. Half the instructions per weight, but the activation
  // rounding costs ~2^-9 relative per term.
  kDotBf16,
};

// y[m, n] = x[m, k] @ w[n, k]^T. x, w and y are row-major and contiguous; no alignment needed.
// w points to float (kF32) or uint16_t (kBF16, kF16) elements.
void linear_small(const float* x,  // [m, k]
                  int64_t m, int64_t k,
                  const void* w,  // [n, k]
                  WeightDType w_dtype, int64_t n,
                  float* y,  // [m, n]
                  Bf16Math math = Bf16Math::kExact);

// y[i, :n] += x[i, :] @ w^T, with y's rows ldy apart (e.g. one slot's rows inside a larger
// logits tensor) and the bf16 math chosen by the caller. kDotBf16 is exact up to summation order
// when every x value is a bf16 number, since the product of two bf16 numbers is exact in f32.
void linear_small_accumulate(const float* x,  // [m, k]
                             int64_t m, int64_t k,
                             const void* w,  // [n, k]
                             WeightDType w_dtype, int64_t n,
                             float* y,  // [m, ldy], first n columns updated
                             int64_t ldy, Bf16Math math);

}  // namespace dspark::kernels
