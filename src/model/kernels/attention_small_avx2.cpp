// attention_small with AVX2 + FMA (head_dim a multiple of 8). See attention_small_variants.h for
// the algorithm and simd_avx2.h for the SIMD policy.
#include "model/kernels/attention_small_variants.h"
#include "model/kernels/simd_avx2.h"

namespace dspark::kernels::attention_small_detail {

void attend_avx2(const HeadGroupTask& task) { HeadGroupAttention<Avx2>::run(task); }
void attend_avx2_bf16_cache(const HeadGroupTask& task) { HeadGroupAttention<Avx2, uint16_t>::run(task); }

}  // namespace dspark::kernels::attention_small_detail
