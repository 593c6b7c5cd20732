// attention_small: argument checks, the variant choice and the split of (sequence, kv head) tasks
// over threads.
#include "model/kernels/attention_small.h"

#include <omp.h>

#include <vector>

#include "common/error.h"
#include "model/kernels/attention_small_variants.h"
#include "model/kernels/cpu_isa.h"

namespace dspark::kernels {
namespace {

using attention_small_detail::HeadGroupKernel;
using attention_small_detail::HeadGroupTask;
using attention_small_detail::kScoresAlignment;

HeadGroupKernel select_kernel(Isa isa, int64_t head_dim) {
  if (isa >= Isa::kAvx512 && head_dim % 16 == 0) return attention_small_detail::attend_avx512;
  if (isa >= Isa::kAvx2 && head_dim % 8 == 0) return attention_small_detail::attend_avx2;
  return attention_small_detail::attend_generic;
}

struct Shape {
  int64_t q_row_stride, n_heads, n_kv_heads, head_dim, capacity;
  float scale;
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
  const size_t needed = static_cast<size_t>(rows * stride + rows + kScoresAlignment * s.head_dim);
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
  t.k = seq.k + kv_offset;
  t.v = seq.v + kv_offset;
  t.head_dim = s.head_dim;
  t.scale = s.scale;
  t.scores = scratch->data();
  t.scores_stride = stride;
  t.inv_sums = scratch->data() + rows * stride;
  t.key_tail = t.inv_sums + rows;
  t.q_offsets = offsets_scratch->data();
  t.out_offsets = offsets_scratch->data() + rows;
  return t;
}

}  // namespace

void attention_small(const float* q, int64_t q_row_stride, const AttentionSeq* seqs, int64_t n_seqs,
                     int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t capacity, float scale,
                     float* out) {
  DSPARK_ASSERT(n_seqs >= 0 && n_heads > 0 && n_kv_heads > 0 && head_dim > 0);
  DSPARK_ASSERT(n_heads % n_kv_heads == 0 && q_row_stride >= n_heads * head_dim);
  for (int64_t i = 0; i < n_seqs; ++i) {
    DSPARK_ASSERT(seqs[i].n_past >= 0 && seqs[i].n_new >= 0 && seqs[i].token_begin >= 0);
    DSPARK_ASSERT(seqs[i].n_past + seqs[i].n_new <= capacity);
  }
  const HeadGroupKernel kernel = select_kernel(current_isa(), head_dim);
  const Shape shape{q_row_stride, n_heads, n_kv_heads, head_dim, capacity, scale};
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
