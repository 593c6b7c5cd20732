// row_ops on the avx512 policy (simd_avx512.h).
#include "model/kernels/row_ops_variants.h"
#include "model/kernels/simd_avx512.h"

namespace dspark::kernels::row_ops_detail {

RowOps row_ops_avx512() { return RowKernels<Avx512>::table(); }

}  // namespace dspark::kernels::row_ops_detail
