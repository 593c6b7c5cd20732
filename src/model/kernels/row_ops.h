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

}  // namespace dspark::kernels
