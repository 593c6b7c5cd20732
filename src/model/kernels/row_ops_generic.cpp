// row_ops on the generic policy (simd_generic.h).
#include "model/kernels/row_ops_variants.h"
#include "model/kernels/simd_generic.h"

namespace dspark::kernels::row_ops_detail {

RowOps row_ops_generic() { return RowKernels<Scalar>::table(); }

}  // namespace dspark::kernels::row_ops_detail
