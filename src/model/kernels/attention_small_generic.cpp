// attention_small in portable C++: one float per "register", so any head_dim works. The fallback
// for CPUs without AVX2 and for head_dim the SIMD variants do not handle.
#include "model/kernels/attention_small_variants.h"
#include "model/kernels/simd_generic.h"

namespace dspark::kernels::attention_small_detail {

void attend_generic(const HeadGroupTask& task) { HeadGroupAttention<Scalar>::run(task); }
void attend_generic_bf16_cache(const HeadGroupTask& task) { HeadGroupAttention<Scalar, uint16_t>::run(task); }

}  // namespace dspark::kernels::attention_small_detail
