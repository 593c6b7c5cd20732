// The target's KV cache: fixed per-sequence slots, allocated once, indexed by position.
// Metadata (which slots are live, how many positions each holds) is kept apart from the storage
// tensors. A forward writes the new keys/values past a slot's length; only `commit` advances it,
// and `truncate` rolls back rejected drafts by moving the length back. Nothing is reallocated
// per step.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "model/kernels/attention_small.h"

namespace dspark::model {

// The cache's element type. bf16 halves what every step streams (and the cache's memory); keys and
// values are rounded to it once, when written, and attention reads them as they are
// (kernels/attention_small.h). f32 keeps them exactly as computed.
//
// A bf16 cache also stores its keys key-blocked (kernels::kBf16KeyBlock positions as
// [head_dim / 2][16][2], kernels/attention_small.h), so attention's scores are 16 keys per
// vdpbf16ps with no horizontal sums. Its capacity is rounded up to whole blocks. Values, and every
// f32 tensor, are [position][head_dim]. The kernels' own enum, so a cache's dtype is what they take.
using KvCacheDType = kernels::KvDtype;
constexpr int64_t kKeyBlock = kernels::kBf16KeyBlock;
const char* kv_cache_dtype_name(KvCacheDType dtype);  // "f32", "bf16"
torch::ScalarType kv_cache_scalar_type(KvCacheDType dtype);

struct KvCacheShape {
  int64_t n_layers = 0;
  int64_t n_slots = 0;     // sequences that can be live at once
  int64_t capacity = 0;    // positions per slot
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
};

class KvCache {
 public:
  KvCache(const KvCacheShape& shape, const torch::Device& device, KvCacheDType dtype = KvCacheDType::kF32);

  // Slots. allocate returns nullopt when all slots are live (an expected condition, not an error).
  std::optional<int64_t> allocate();
  void free(int64_t slot);
  bool is_live(int64_t slot) const;
  int64_t n_free() const;

  int64_t length(int64_t slot) const;      // committed positions
  int64_t capacity() const { return shape_.capacity; }
  const KvCacheShape& shape() const { return shape_; }
  KvCacheDType dtype() const { return dtype_; }

  // Checks that `n_new` more positions fit in `slot`; throws dspark::Error otherwise. No side effects.
  void check_room(int64_t slot, int64_t n_new) const;
  // Makes positions [length, length + n_new) of `slot` part of the sequence (after a forward wrote them).
  void commit(int64_t slot, int64_t n_new);
  // Keeps positions [0, new_length): rollback after rejected drafts.
  void truncate(int64_t slot, int64_t new_length);
  // Makes `dst` a copy of `src`'s committed positions (shared prompt prefix for several samples).
  void copy_slot(int64_t src, int64_t dst);

  // The storage: values [n_slots, n_kv_heads, capacity, head_dim] of dtype(); keys the same for
  // f32, and [n_slots, n_kv_heads, capacity / kKeyBlock, head_dim / 2, kKeyBlock, 2] for bf16.
  // Tensor code reads and writes through read_keys / read_values / write instead.
  torch::Tensor& keys(int64_t layer) { return keys_[layer]; }
  torch::Tensor& values(int64_t layer) { return values_[layer]; }

  // Positions [0, n) of `slot`: [n_kv_heads, n, head_dim] in the cache's dtype (a copy for bf16 keys).
  torch::Tensor read_keys(int64_t layer, int64_t slot, int64_t n) const;
  torch::Tensor read_values(int64_t layer, int64_t slot, int64_t n) const;
  // Stores token t's keys/values [n_tokens, n_kv_heads, head_dim] (any float dtype; rounded to the
  // cache's) at slots[t], positions[t] (both [n_tokens] int64).
  void write(int64_t layer, const torch::Tensor& slots, const torch::Tensor& positions, const torch::Tensor& k,
             const torch::Tensor& v);

 private:
  void check_slot(int64_t slot) const;

  KvCacheShape shape_;
  KvCacheDType dtype_;
  std::vector<torch::Tensor> keys_;    // per layer
  std::vector<torch::Tensor> values_;  // per layer
  std::vector<int64_t> lengths_;       // per slot: committed positions
  std::vector<bool> live_;             // per slot: allocated
};

}  // namespace dspark::model
