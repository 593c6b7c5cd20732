// row_ops: the variant choice.
#include "model/kernels/row_ops.h"

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

}  // namespace dspark::kernels
