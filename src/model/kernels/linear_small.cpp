// linear_small: argument checks, the variant choice and the split of output columns over threads.
#include "model/kernels/linear_small.h"

#include <omp.h>

#include <memory>

#include "common/error.h"
#include "model/kernels/column_runs.h"
#include "model/kernels/cpu_isa.h"
#include "model/kernels/linear_small_variants.h"

namespace dspark::kernels {
namespace {

using linear_small_detail::ColumnsKernel;
using linear_small_detail::PackX;
using linear_small_detail::Problem;

// Thread chunks start on multiples of 16 columns so that, for a 64-byte aligned y, no two threads
// write the same cache line of y.
constexpr int64_t kColumnAlignment = 16;
// Below this many multiply-adds, waking the second thread costs more than it saves (measured,
// m = 1, k = 1024, bf16: 64 rows 1.5 us on one thread and 3.7 us on two; even at 256 rows).
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

// A kernel and, when it reads x in a layout of its own, how to pack x for it.
struct Variant {
  ColumnsKernel columns;
  PackX pack = nullptr;
  size_t packed_element_bytes = 0;
};

Variant select_variant(Isa isa, WeightDType w_dtype, Bf16Math math) {
  switch (isa) {
    case Isa::kGeneric: return {linear_small_detail::columns_generic};
    case Isa::kAvx2: return {linear_small_detail::columns_avx2};
    case Isa::kAmx:  // the tile unit multiplies bf16 activations, not the f32 ones kExact keeps
    case Isa::kAvx512Bf16:
      if (w_dtype == WeightDType::kBF16 && math == Bf16Math::kDotBf16) {
        return {linear_small_detail::columns_avx512bf16_dot,
                linear_small_detail::pack_x_bf16_avx512bf16, sizeof(uint16_t)};
      }
      [[fallthrough]];
    case Isa::kAvx512:
      return {linear_small_detail::columns_avx512, linear_small_detail::pack_x_avx512,
              sizeof(float)};
  }
  return {linear_small_detail::columns_generic};
}

// Columns per chunk handed to a thread (ColumnRuns): a multiple of kColumnAlignment and of the
// AVX-512 tiles' 48-column blocks; at 8 rows and k = 1024 a chunk is ~4 us of one core's work.
constexpr int64_t kChunkColumns = 48;
static_assert(kChunkColumns % kColumnAlignment == 0);

void run_over_columns(ColumnsKernel kernel, const Problem& p) {
  const bool parallel =
      p.m * p.n * p.k >= kMinParallelWork && omp_get_max_threads() > 1 && !omp_in_parallel();
  if (!parallel) {
    kernel(p, 0, p.n);
    return;
  }
  ColumnRuns runs(p.n, kChunkColumns, omp_get_max_threads());
#pragma omp parallel
  {
    const int self = omp_get_thread_num();
    int64_t begin = 0, end = 0;
    while (runs.next(self, &begin, &end)) kernel(p, begin, end);
  }
}

void run(const float* x, int64_t m, int64_t k, const void* w, WeightDType w_dtype, int64_t n, float* y,
         int64_t ldy, bool accumulate, Bf16Math math) {
  DSPARK_ASSERT(m >= 0 && k >= 0 && n >= 0);
  if (m == 0 || n == 0) return;
  DSPARK_ASSERT(x != nullptr && w != nullptr && y != nullptr);
  const Variant variant = select_variant(current_isa(), w_dtype, math);
  Problem p{x, m, k, w, w_dtype, n, y, ldy, accumulate, nullptr};
  // Per call: small (m * k elements), and calls may run concurrently. Not zero-initialised: the
  // packing writes every element.
  std::unique_ptr<float[]> packed;
  if (variant.pack != nullptr) {
    const size_t bytes = static_cast<size_t>(linear_small_detail::packed_x_elements(m, k)) *
                         variant.packed_element_bytes;
    packed = std::make_unique_for_overwrite<float[]>((bytes + sizeof(float) - 1) / sizeof(float));
    variant.pack(x, m, k, packed.get());
    p.x_packed = packed.get();
  }
  run_over_columns(variant.columns, p);
}

}  // namespace

void linear_small(const float* x, int64_t m, int64_t k, const void* w, WeightDType w_dtype,
                  int64_t n, float* y, Bf16Math math) {
  run(x, m, k, w, w_dtype, n, y, n, false, math);
}

void linear_small_accumulate(const float* x, int64_t m, int64_t k, const void* w, WeightDType w_dtype,
                             int64_t n, float* y, int64_t ldy, Bf16Math math) {
  DSPARK_ASSERT(ldy >= n);
  run(x, m, k, w, w_dtype, n, y, ldy, true, math);
}

}  // namespace dspark::kernels
