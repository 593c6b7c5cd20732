// The element-wise parts of a decoder layer for the few rows of a decode / verify step, on raw
// f32 pointers. libtorch spends microseconds of dispatch per op, and a layer has dozens of them;
// at decode time that overhead rivals the weight streaming, so the CPU fast path fuses them here.
#pragma once
#include <cstdint>

namespace dspark::kernels {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for n_rows rows of `dim` values.
void rms_norm_rows(const float* x,       // [n_rows, dim]
                   const float* weight,  // [dim]
                   int64_t n_rows, int64_t dim, float eps,
                   float* out);          // [n_rows, dim] (may alias x)

// In place, per row r and head h: optional RMSNorm over head_dim (Qwen3 q/k norm), then the
// rotate-half rotary embedding with the row's cos/sin.
void norm_rope_heads(float* x,              // [n_rows, row_stride]: heads at the start of each row
                     int64_t n_rows, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                     const float* norm_weight,  // [head_dim], or null for no norm
                     float eps,
                     const float* cos,      // [n_rows, head_dim]
                     const float* sin);     // [n_rows, head_dim]

// out[r, i] = silu(gate_up[r, i]) * gate_up[r, n_inner + i]
void silu_mul_rows(const float* gate_up,  // [n_rows, 2 n_inner]
                   int64_t n_rows, int64_t n_inner,
                   float* out);           // [n_rows, n_inner]

// x += y over n values.
void add_in_place(float* x, const float* y, int64_t n);

// y[i, v] += sum_j a[i, j] * w[j, v] for m rows and v < n: y += a W^T with W stored transposed
// (w = W^T, [r, ldw], f32 or bf16 bits), each sum taken in order of j. For a small r (a low-rank
// factor, as the Markov head's W2), where a dot product per output would spend more on its
// horizontal sum than on its r multiply-adds. Columns are split between the threads when n is large.
void add_combination(float* y,        // [m, ldy]
                     int64_t ldy,
                     const float* a,  // [m, r]
                     int64_t m, int64_t r,
                     const float* w,  // [r, ldw]
                     int64_t ldw, int64_t n);
void add_combination(float* y, int64_t ldy, const float* a, int64_t m, int64_t r,
                     const uint16_t* w,  // [r, ldw] bf16 bits
                     int64_t ldw, int64_t n);

}  // namespace dspark::kernels
