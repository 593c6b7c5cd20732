// CPU tensors backed by transparent huge pages, for the weight matrices every decode step streams
// end to end. With 4 KiB pages a step of the Qwen3-0.6B shape crosses ~290,000 pages, and in a VM
// each TLB miss is a two-level walk; 2 MiB pages cut that 512-fold. Measured on the 2-core dev VM
// with the model loaded four times in one process (heap, huge, huge, heap, so that load order
// cannot favour either), alternating per forward (bf16, context 1024, 2 runs): T(8) 1-7% less
// time with the weights in huge pages, T(1) the same within noise (docs/benchmarks.md). The KV
// cache stays on the heap.
//
// Linux asks for huge pages with madvise(MADV_HUGEPAGE), which works whenever
// /sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise"; elsewhere, or when the
// kernel has none free, the memory is ordinary pages and nothing else changes.
#pragma once
#include <vector>

#include <torch/torch.h>

namespace dspark::model {

// Tensors smaller than this come from the usual allocator: below one huge page there is nothing
// to gain.
constexpr int64_t kHugePageBytes = int64_t{2} << 20;

// An uninitialised contiguous CPU tensor; from its own 2 MiB-aligned mapping advised for huge
// pages when it holds at least kHugePageBytes. Throws dspark::Error when the memory cannot be had.
torch::Tensor empty_in_huge_pages(const std::vector<int64_t>& shape, torch::ScalarType dtype);

}  // namespace dspark::model
