// Softmax of one row of logits: the sampling transform runs it once per drafted slot and per
// verified row, where libtorch's dispatch and glibc's scalar expf would cost more than the rest of
// the slot. SIMD variant chosen by current_isa() (cpu_isa.h).
#pragma once
#include <cstdint>

namespace dspark::kernels {

// out[i] = exp(x[i] - max x) / sum_j exp(x[j] - max x). Entries of -infinity (masked tokens) give
// exactly 0; at least one entry must be finite. out may alias x.
void softmax_row(const float* x,  // [n]
                 int64_t n,
                 float* out);     // [n]

}  // namespace dspark::kernels
