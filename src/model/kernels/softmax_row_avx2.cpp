// softmax_row on the avx2 policy (simd_avx2.h).
#include "model/kernels/simd_avx2.h"
#include "model/kernels/softmax_row_variants.h"

namespace dspark::kernels::softmax_row_detail {

void softmax_row_avx2(const float* x, int64_t n, float* out) { softmax_row<Avx2>(x, n, out); }

}  // namespace dspark::kernels::softmax_row_detail
