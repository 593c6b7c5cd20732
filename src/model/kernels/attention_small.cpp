// attention_small: argument checks, the variant choice and the split of (sequence, kv head) tasks
// over threads.
#include "model/kernels/attention_small.h"

#include <omp.h>

#include <cstdint>
#include <vector>

#include "common/error.h"
#include "model/kernels/attention_small_variants.h"
#include "model/kernels/cpu_isa.h"

namespace dspark::kernels {
namespace {

using attention_small_detail::HeadGroupKernel;
using attention_small_detail::HeadGroupTask;
using attention_small_detail::kScoresAlignment;

HeadGroupKernel select_kernel(Isa isa, int64_t head_dim, KvDtype kv_dtype) {
  namespace d = attention_small_detail;
  if (kv_dtype == KvDtype::kBF16) {
    if (isa >= Isa::kAvx512Bf16 && head_dim % 32 == 0) return d::attend_avx512bf16;
    if (isa >= Isa::kAvx512 && head_dim % 16 == 0) return d::attend_avx512_bf16_cache;
    if (isa >= Isa::kAvx2 && head_dim % 8 == 0) return d::attend_avx2_bf16_cache;
    return d::attend_generic_bf16_cache;
  }
  if (isa >= Isa::kAvx512 && head_dim % 16 == 0) return d::attend_avx512;
  if (isa >= Isa::kAvx2 && head_dim % 8 == 0) return d::attend_avx2;
  return d::attend_generic;
}

struct Shape {
  int64_t q_row_stride, n_heads, n_kv_heads, head_dim, capacity;
  float scale;
  KvDtype kv_dtype;
};

// Builds the task of kv head kv_head of seq, pointing into the caller's scratch, which grows as
// needed (one per thread, reused across its tasks).
HeadGroupTask make_task(const float* q, float* out, const AttentionSeq& seq, int64_t kv_head,
                        const Shape& s, std::vector<float>* scratch,
                        std::vector<int64_t>* offsets_scratch) {
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t keys = seq.n_past + seq.n_new;
  const int64_t rows = group * seq.n_new;
  const int64_t stride = (keys + kScoresAlignment - 1) / kScoresAlignment * kScoresAlignment;
  // Scores, inverse sums, the key tail (floats are wide enough for either cache type), then the
  // bf16 kernel's buffers, 64-byte aligned.
  const int64_t floats = rows * stride + rows + kScoresAlignment * s.head_dim;
  const int64_t bf16_floats =
      s.kv_dtype == KvDtype::kBF16 ? (attention_small_detail::bf16_scratch_bytes(rows, s.head_dim, stride) + 3) / 4 : 0;
  const size_t needed = static_cast<size_t>(floats + bf16_floats + 16);
  if (scratch->size() < needed) scratch->resize(needed);
  if (offsets_scratch->size() < static_cast<size_t>(2 * rows)) offsets_scratch->resize(2 * rows);

  const int64_t first_head = kv_head * group * s.head_dim;
  const int64_t kv_offset = kv_head * s.capacity * s.head_dim;
  HeadGroupTask t;
  t.q = q + seq.token_begin * s.q_row_stride + first_head;
  t.out = out + seq.token_begin * s.n_heads * s.head_dim + first_head;
  t.q_token_stride = s.q_row_stride;
  t.out_token_stride = s.n_heads * s.head_dim;
  t.group = group;
  t.n_new = seq.n_new;
  t.n_past = seq.n_past;
  t.causal = seq.causal;
  const int64_t element = s.kv_dtype == KvDtype::kBF16 ? 2 : 4;
  t.k = static_cast<const char*>(seq.k) + kv_offset * element;
  t.v = static_cast<const char*>(seq.v) + kv_offset * element;
  t.head_dim = s.head_dim;
  t.scale = s.scale;
  t.scores = scratch->data();
  t.scores_stride = stride;
  t.inv_sums = scratch->data() + rows * stride;
  t.key_tail = t.inv_sums + rows;  // kScoresAlignment * head_dim floats
  const uintptr_t after_tail = reinterpret_cast<uintptr_t>(t.inv_sums + rows + kScoresAlignment * s.head_dim);
  t.bf16_scratch = reinterpret_cast<void*>((after_tail + 63) / 64 * 64);
  t.q_offsets = offsets_scratch->data();
  t.out_offsets = offsets_scratch->data() + rows;
  for (int64_t r = 0; r < rows; ++r) {
    t.q_offsets[r] = (r / group) * t.q_token_stride + (r % group) * s.head_dim;
    t.out_offsets[r] = (r / group) * t.out_token_stride + (r % group) * s.head_dim;
  }
  return t;
}

}  // namespace

void attention_small(const float* q, int64_t q_row_stride, const AttentionSeq* seqs, int64_t n_seqs,
                     int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t capacity, float scale,
                     float* out, KvDtype kv_dtype) {
  DSPARK_ASSERT(n_seqs >= 0 && n_heads > 0 && n_kv_heads > 0 && head_dim > 0);
  DSPARK_ASSERT(n_heads % n_kv_heads == 0 && q_row_stride >= n_heads * head_dim);
  for (int64_t i = 0; i < n_seqs; ++i) {
    DSPARK_ASSERT(seqs[i].n_past >= 0 && seqs[i].n_new >= 0 && seqs[i].token_begin >= 0);
    DSPARK_ASSERT(seqs[i].n_past + seqs[i].n_new <= capacity);
  }
  // A bf16 cache's keys come in whole blocks of 16 positions of head_dim / 2 pairs (kv_cache.h).
  DSPARK_ASSERT(kv_dtype == KvDtype::kF32 || (capacity % 16 == 0 && head_dim % 2 == 0));
  const HeadGroupKernel kernel = select_kernel(current_isa(), head_dim, kv_dtype);
  const Shape shape{q_row_stride, n_heads, n_kv_heads, head_dim, capacity, scale, kv_dtype};
  const int64_t tasks = n_seqs * n_kv_heads;
  // Dynamic scheduling: ragged sequences make tasks unequal, and a task is long enough (a whole
  // kv head's cache) that handing them out one by one costs nothing measurable.
#pragma omp parallel if (tasks > 1 && !omp_in_parallel())
  {
    std::vector<float> scratch;
    std::vector<int64_t> row_offsets;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const AttentionSeq& seq = seqs[task / n_kv_heads];
      if (seq.n_new == 0) continue;
      kernel(make_task(q, out, seq, task % n_kv_heads, shape, &scratch, &row_offsets));
    }
  }
}

}  // namespace dspark::kernels
