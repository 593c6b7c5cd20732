// softmax_row: the variant choice.
#include "model/kernels/softmax_row.h"

#include "model/kernels/cpu_isa.h"
#include "model/kernels/softmax_row_variants.h"

namespace dspark::kernels {

void softmax_row(const float* x, int64_t n, float* out) {
  const Isa isa = current_isa();
  if (isa >= Isa::kAvx512) return softmax_row_detail::softmax_row_avx512(x, n, out);
  if (isa >= Isa::kAvx2) return softmax_row_detail::softmax_row_avx2(x, n, out);
  softmax_row_detail::softmax_row_generic(x, n, out);
}

}  // namespace dspark::kernels
