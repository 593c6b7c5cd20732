// Internal to linear_small: the per-ISA variants and the tiling loop they share. Each variant
// lives in a file compiled with its ISA flags (see CMakeLists.txt); linear_small.cpp picks one at
// run time.
//
// Code in the ISA files must not produce out-of-line copies of inline functions shared with other
// files (the linker would keep one copy, possibly the AVX-512 one, for every caller). Hence their
// helpers live in anonymous namespaces and the templates below are only instantiated with types
// from those anonymous namespaces, which gives every instantiation internal linkage.
#pragma once
#include <cstdint>

#include "model/kernels/linear_small.h"

namespace dspark::kernels::linear_small_detail {

struct Problem {
  const float* x;  // [m, k]
  int64_t m;
  int64_t k;
  const void* w;  // [n, k], float or uint16_t per w_dtype
  WeightDType w_dtype;
  int64_t n;
  float* y;  // [m, ldy]
  int64_t ldy;      // row stride of y (>= n)
  bool accumulate;  // y += x @ w^T instead of y = x @ w^T
  // x rewritten by the variant's PackX (AVX-512 variants only; null otherwise).
  const void* x_packed;
};

// Each computes y[:, n_begin:n_end) for all m rows.
using ColumnsKernel = void (*)(const Problem& p, int64_t n_begin, int64_t n_end);
void columns_generic(const Problem& p, int64_t n_begin, int64_t n_end);
void columns_avx2(const Problem& p, int64_t n_begin, int64_t n_end);
// Reads p.x_packed from pack_x_avx512.
void columns_avx512(const Problem& p, int64_t n_begin, int64_t n_end);
// kDotBf16 for bf16 weights; reads p.x_packed from pack_x_bf16_avx512bf16.
void columns_avx512bf16_dot(const Problem& p, int64_t n_begin, int64_t n_end);

// Rewrites x [m, k] into out, which holds packed_x_elements(m, k) elements (layout: see
// linear_small_avx512_tiles.h).
using PackX = void (*)(const float* x, int64_t m, int64_t k, void* out);
constexpr int64_t kPackAlignment = 32;  // packed rows are zero-filled up to a multiple of this
// `static`: every including file gets its own copy (see the top of this file).
static inline int64_t padded_k(int64_t k) {
  return (k + kPackAlignment - 1) / kPackAlignment * kPackAlignment;
}
static inline int64_t packed_x_elements(int64_t m, int64_t k) { return m * padded_k(k); }
void pack_x_avx512(const float* x, int64_t m, int64_t k, void* out);  // float elements
// Also rounds to bf16 (nearest even); uint16_t elements.
void pack_x_bf16_avx512bf16(const float* x, int64_t m, int64_t k, void* out);

// Walks y[:, n_begin:n_end) in blocks of Tiles::kColumns output columns. Each block's weight rows
// come from memory once and are then applied to every tile of up to Tiles::kMaxRows rows of x
// while they are still in L1/L2, so for any m the weights are streamed once.
// Tiles::tile(p, row, rows, col, cols) computes y[row:row+rows, col:col+cols).
template <class Tiles>
void for_each_tile(const Problem& p, int64_t n_begin, int64_t n_end) {
  for (int64_t col = n_begin; col < n_end; col += Tiles::kColumns) {
    const int64_t cols = n_end - col < Tiles::kColumns ? n_end - col : Tiles::kColumns;
    for (int64_t row = 0; row < p.m; row += Tiles::kMaxRows) {
      const int64_t rows = p.m - row < Tiles::kMaxRows ? p.m - row : Tiles::kMaxRows;
      Tiles::tile(p, row, static_cast<int>(rows), col, static_cast<int>(cols));
    }
  }
}

}  // namespace dspark::kernels::linear_small_detail
