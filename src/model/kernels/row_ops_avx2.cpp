// row_ops on the avx2 policy (simd_avx2.h).
#include "model/kernels/row_ops_variants.h"
#include "model/kernels/simd_avx2.h"

namespace dspark::kernels::row_ops_detail {

RowOps row_ops_avx2() { return RowKernels<Avx2>::table(); }

}  // namespace dspark::kernels::row_ops_detail
