// softmax_row on the generic policy (simd_generic.h).
#include "model/kernels/simd_generic.h"
#include "model/kernels/softmax_row_variants.h"

namespace dspark::kernels::softmax_row_detail {

void softmax_row_generic(const float* x, int64_t n, float* out) { softmax_row<Scalar>(x, n, out); }

}  // namespace dspark::kernels::softmax_row_detail
