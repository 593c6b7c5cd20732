// Internal to row_ops: the element-wise kernels on a SIMD policy V (simd_*.h), instantiated by
// the per-ISA files, and the table row_ops.cpp picks from at run time. A decode step's rows
// spent more time in these loops, compiled for plain x86-64 with glibc's scalar expf, than in
// attention: 3 ms of silu and 2 ms of q/k norm + RoPE per 8-token verify step on the
// Qwen3-0.6B shape.
//
// Widths that are not a multiple of V::kWidth finish element by element with the same formulas.
#pragma once
#include <cmath>
#include <cstdint>

namespace dspark::kernels::row_ops_detail {

struct RowOps {
  void (*rms_norm_rows)(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps, float* out);
  void (*norm_rope_heads)(float* x, int64_t n_rows, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                          const float* norm_weight, float eps, const float* cos, const float* sin);
  void (*silu_mul_rows)(const float* gate_up, int64_t n_rows, int64_t n_inner, float* out);
  void (*add_in_place)(float* x, const float* y, int64_t n);
};
RowOps row_ops_generic();
RowOps row_ops_avx2();
RowOps row_ops_avx512();

template <class V>
struct RowKernels {
  using Reg = typename V::Reg;
  static constexpr int64_t W = V::kWidth;

  static float sum_squares(const float* x, int64_t n) {
    Reg acc = V::zero();
    int64_t i = 0;
    for (; i + W <= n; i += W) acc = V::fmadd(V::load(x + i), V::load(x + i), acc);
    float sum = V::reduce_add(acc);
    for (; i < n; ++i) sum += x[i] * x[i];
    return sum;
  }

  static void rms_norm_row(const float* x, const float* weight, int64_t dim, float eps, float* out) {
    const float inv_rms = 1.0f / std::sqrt(sum_squares(x, dim) / static_cast<float>(dim) + eps);
    const Reg scale = V::broadcast(inv_rms);
    int64_t i = 0;
    for (; i + W <= dim; i += W) V::store(out + i, V::mul(V::mul(V::load(x + i), scale), V::load(weight + i)));
    for (; i < dim; ++i) out[i] = x[i] * inv_rms * weight[i];
  }

  static void rms_norm_rows(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
                            float* out) {
    for (int64_t r = 0; r < n_rows; ++r) rms_norm_row(x + r * dim, weight, dim, eps, out + r * dim);
  }

  // Rotate-half RoPE of one head in place: v[i] and v[i + half] rotate together.
  static void rope_head(float* v, int64_t half, const float* c, const float* s) {
    int64_t i = 0;
    for (; i + W <= half; i += W) {
      const Reg a = V::load(v + i), b = V::load(v + i + half);
      V::store(v + i, V::sub(V::mul(a, V::load(c + i)), V::mul(b, V::load(s + i))));
      V::store(v + i + half, V::fmadd(a, V::load(s + i + half), V::mul(b, V::load(c + i + half))));
    }
    for (; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * c[i] - b * s[i];
      v[i + half] = b * c[i + half] + a * s[i + half];
    }
  }

  static void norm_rope_heads(float* x, int64_t n_rows, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                              const float* norm_weight, float eps, const float* cos, const float* sin) {
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + r * row_stride + h * head_dim;
        if (norm_weight != nullptr) rms_norm_row(v, norm_weight, head_dim, eps, v);
        rope_head(v, head_dim / 2, cos + r * head_dim, sin + r * head_dim);
      }
    }
  }

  // silu(g) * u = g / (1 + exp(-g)) * u.
  static void silu_mul_rows(const float* gate_up, int64_t n_rows, int64_t n_inner, float* out) {
    const Reg one = V::broadcast(1.0f);
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* gate = gate_up + r * 2 * n_inner;
      const float* up = gate + n_inner;
      float* o = out + r * n_inner;
      int64_t i = 0;
      for (; i + W <= n_inner; i += W) {
        const Reg g = V::load(gate + i);
        const Reg silu = V::div(g, V::add(one, V::exp(V::sub(V::zero(), g))));
        V::store(o + i, V::mul(silu, V::load(up + i)));
      }
      for (; i < n_inner; ++i) o[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
  }

  static void add_in_place(float* x, const float* y, int64_t n) {
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(x + i, V::add(V::load(x + i), V::load(y + i)));
    for (; i < n; ++i) x[i] += y[i];
  }

  static RowOps table() { return {rms_norm_rows, norm_rope_heads, silu_mul_rows, add_in_place}; }
};

}  // namespace dspark::kernels::row_ops_detail
