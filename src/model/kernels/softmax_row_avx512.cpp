// softmax_row on the avx512 policy (simd_avx512.h).
#include "model/kernels/simd_avx512.h"
#include "model/kernels/softmax_row_variants.h"

namespace dspark::kernels::softmax_row_detail {

void softmax_row_avx512(const float* x, int64_t n, float* out) { softmax_row<Avx512>(x, n, out); }

}  // namespace dspark::kernels::softmax_row_detail
