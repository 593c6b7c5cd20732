// row_ops: the variant choice.
#include "model/kernels/row_ops.h"

#include <omp.h>

#include <algorithm>

#include "model/kernels/cpu_isa.h"
#include "model/kernels/row_ops_variants.h"

namespace dspark::kernels {

namespace {

using row_ops_detail::RowOps;

const RowOps& ops() {
  const Isa isa = current_isa();
  static const RowOps avx512 = row_ops_detail::row_ops_avx512();
  static const RowOps avx2 = row_ops_detail::row_ops_avx2();
  static const RowOps generic = row_ops_detail::row_ops_generic();
  if (isa >= Isa::kAvx512) return avx512;
  if (isa >= Isa::kAvx2) return avx2;
  return generic;
}

}  // namespace

void rms_norm_rows(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps, float* out) {
  ops().rms_norm_rows(x, weight, n_rows, dim, eps, out);
}

void norm_rope_heads(float* x, int64_t n_rows, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                     const float* norm_weight, float eps, const float* cos, const float* sin) {
  ops().norm_rope_heads(x, n_rows, row_stride, n_heads, head_dim, norm_weight, eps, cos, sin);
}

void silu_mul_rows(const float* gate_up, int64_t n_rows, int64_t n_inner, float* out) {
  ops().silu_mul_rows(gate_up, n_rows, n_inner, out);
}

void add_in_place(float* x, const float* y, int64_t n) { ops().add_in_place(x, y, n); }

namespace {

// Below this many columns one thread does it all: waking the other costs more than it saves.
constexpr int64_t kColumnsPerThread = 2048;

template <class T, class Kernel>
void add_combination_split(float* y, int64_t ldy, const float* a, int64_t m, int64_t r, const T* w, int64_t ldw,
                           int64_t n, Kernel kernel) {
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t i = 0; i < m; ++i) kernel(y + i * ldy + begin, a + i * r, r, w + begin, ldw, end - begin);
  };
  const int n_threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), std::max<int64_t>(1, n / kColumnsPerThread)));
  if (n_threads <= 1) return rows(0, n);
#pragma omp parallel num_threads(n_threads)
  {
    // Whole 64-column units, so each thread's share starts on a cache line of y.
    const int64_t units = (n + 63) / 64, t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = std::min(n, units * t / nt * 64), end = std::min(n, units * (t + 1) / nt * 64);
    if (end > begin) rows(begin, end);
  }
}

}  // namespace

void add_combination(float* y, int64_t ldy, const float* a, int64_t m, int64_t r, const float* w, int64_t ldw,
                     int64_t n) {
  add_combination_split(y, ldy, a, m, r, w, ldw, n, ops().add_combination_f32);
}

void add_combination(float* y, int64_t ldy, const float* a, int64_t m, int64_t r, const uint16_t* w, int64_t ldw,
                     int64_t n) {
  add_combination_split(y, ldy, a, m, r, w, ldw, n, ops().add_combination_bf16);
}

}  // namespace dspark::kernels
