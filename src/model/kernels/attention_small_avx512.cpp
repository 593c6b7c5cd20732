// attention_small with AVX-512 (head_dim a multiple of 16). See attention_small_variants.h for the
// algorithm and simd_avx512.h for the SIMD policy.
#include "model/kernels/attention_small_variants.h"
#include "model/kernels/simd_avx512.h"

namespace dspark::kernels::attention_small_detail {

void attend_avx512(const HeadGroupTask& task) { HeadGroupAttention<Avx512>::run(task); }
void attend_avx512_bf16_cache(const HeadGroupTask& task) { HeadGroupAttention<Avx512, uint16_t>::run(task); }

}  // namespace dspark::kernels::attention_small_detail
