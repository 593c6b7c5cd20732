// Attention of the few new tokens of a decode / verify step over a KV cache. One (sequence, kv
// head) pair is one task: its keys and values are read once for all query heads sharing that kv
// head (GQA) and all new tokens of the sequence, which keeps verifying 8 tokens close to the cost
// of decoding one. Tasks are spread over the OpenMP threads. q and out are f32; the cache holds
// f32 or bf16. The SIMD variant follows current_isa() (cpu_isa.h); head_dim not a multiple of 16
// runs the portable variant.
//
// A bf16 cache halves the bytes a step streams. With AVX512_BF16 (and head_dim a multiple of 32)
// its dot products run on vdpbf16ps, which multiplies bf16 pairs exactly and adds them in f32:
// q and the softmax probabilities are rounded to bf16 for it (relative error 2^-9 each, what the
// cache's own rounding already costs), which halves a verify step's attention arithmetic too.
// Elsewhere the bf16 keys and values are widened to f32 exactly and the arithmetic is f32's.
#pragma once
#include <cstdint>

namespace dspark::kernels {

// The cache's element type: f32, or bf16 (the upper half of an f32, as uint16_t).
enum class KvDtype { kF32, kBF16 };

// bf16 keys are key-blocked: each run of kBf16KeyBlock positions is stored as
// [head_dim / 2][kBf16KeyBlock][2], so one 512-bit register holds the same pair of elements of 16
// keys. Element e of the key at position `lane` of its block sits at bf16_key_offset(lane, e)
// from the block's start (block b starts at b * kBf16KeyBlock * head_dim).
constexpr int64_t kBf16KeyBlock = 16;
constexpr int64_t bf16_key_offset(int64_t lane, int64_t e) { return (e / 2) * 2 * kBf16KeyBlock + lane * 2 + e % 2; }

struct AttentionSeq {
  const void* k;        // [n_kv_heads, capacity, head_dim] of KvDtype: positions 0 .. n_past+n_new-1 written;
                        // bf16 keys key-blocked (above), capacity then a multiple of kBf16KeyBlock
  const void* v;        // [n_kv_heads, capacity, head_dim] of KvDtype
  int64_t n_past;       // cached positions before this step's new tokens
  int64_t token_begin;  // index of this sequence's first new token in the flattened q/out rows
  int64_t n_new;        // new tokens of this sequence (query i sits at position n_past + i)
  bool causal = true;   // false: every new token sees all n_past + n_new positions (a drafter's
                        // block, whose slots attend to each other both ways)
};

// Query head h reads kv head h / (n_heads / n_kv_heads); new token i of a sequence attends to its
// positions 0 .. n_past + i (causal) or 0 .. n_past + n_new - 1 (not). Rows of out not covered by any sequence are left untouched.
void attention_small(const float* q,        // [n_tokens, q_row_stride], already rotated: n_heads x
                                           // head_dim at the start of each row, the rest not read
                     int64_t q_row_stride,  // >= n_heads * head_dim (e.g. the fused q/k/v row width)
                     const AttentionSeq* seqs,  // [n_seqs]
                     int64_t n_seqs, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                     int64_t capacity, float scale,
                     float* out,  // [n_tokens, n_heads, head_dim]
                     KvDtype kv_dtype = KvDtype::kF32);

}  // namespace dspark::kernels
