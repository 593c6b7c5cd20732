#include "model/kv_cache.h"

#include <string>

#include "common/error.h"

namespace dspark::model {

const char* kv_cache_dtype_name(KvCacheDType dtype) { return dtype == KvCacheDType::kBF16 ? "bf16" : "f32"; }

torch::ScalarType kv_cache_scalar_type(KvCacheDType dtype) {
  return dtype == KvCacheDType::kBF16 ? torch::kBFloat16 : torch::kFloat32;
}

namespace {

KvCacheShape rounded_for(KvCacheShape shape, KvCacheDType dtype) {
  if (dtype == KvCacheDType::kBF16) {
    DSPARK_ASSERT(shape.head_dim % 2 == 0);
    shape.capacity = (shape.capacity + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
  }
  return shape;
}

}  // namespace

KvCache::KvCache(const KvCacheShape& shape, const torch::Device& device, KvCacheDType dtype)
    : shape_(rounded_for(shape, dtype)), dtype_(dtype), lengths_(shape.n_slots, 0), live_(shape.n_slots, false) {
  auto options = torch::TensorOptions().dtype(kv_cache_scalar_type(dtype)).device(device);
  const KvCacheShape& s = shape_;
  for (int64_t l = 0; l < s.n_layers; ++l) {
    if (dtype == KvCacheDType::kBF16) {
      keys_.push_back(torch::zeros(
          {s.n_slots, s.n_kv_heads, s.capacity / kKeyBlock, s.head_dim / 2, kKeyBlock, 2}, options));
    } else {
      keys_.push_back(torch::zeros({s.n_slots, s.n_kv_heads, s.capacity, s.head_dim}, options));
    }
    values_.push_back(torch::zeros({s.n_slots, s.n_kv_heads, s.capacity, s.head_dim}, options));
  }
}

torch::Tensor KvCache::read_keys(int64_t layer, int64_t slot, int64_t n) const {
  if (dtype_ != KvCacheDType::kBF16) return keys_[layer][slot].narrow(1, 0, n);
  const int64_t blocks = (n + kKeyBlock - 1) / kKeyBlock;
  // [kv, blocks, hd/2, 16, 2] -> [kv, blocks, 16, hd/2, 2] -> [kv, blocks * 16, hd]
  return keys_[layer][slot]
      .narrow(1, 0, blocks)
      .permute({0, 1, 3, 2, 4})
      .reshape({shape_.n_kv_heads, blocks * kKeyBlock, shape_.head_dim})
      .narrow(1, 0, n);
}

torch::Tensor KvCache::read_values(int64_t layer, int64_t slot, int64_t n) const {
  return values_[layer][slot].narrow(1, 0, n);
}

void KvCache::write(int64_t layer, const torch::Tensor& slots, const torch::Tensor& positions, const torch::Tensor& k,
                    const torch::Tensor& v) {
  using torch::indexing::Slice;
  const torch::ScalarType type = kv_cache_scalar_type(dtype_);
  // Advanced indices around full slices put the token dimension first: the indexed views are
  // [n_tokens, n_kv_heads, head_dim] (values, f32 keys) and [n_tokens, n_kv_heads, head_dim / 2, 2]
  // (bf16 keys), matching k and v.
  values_[layer].index_put_({slots, Slice(), positions}, v.to(type));
  if (dtype_ != KvCacheDType::kBF16) {
    keys_[layer].index_put_({slots, Slice(), positions}, k.to(type));
    return;
  }
  const torch::Tensor pairs = k.to(type).reshape({k.size(0), shape_.n_kv_heads, shape_.head_dim / 2, 2});
  keys_[layer].index_put_({slots, Slice(), positions.div(kKeyBlock, "floor"), Slice(), positions.remainder(kKeyBlock)},
                          pairs);
}

std::optional<int64_t> KvCache::allocate() {
  for (int64_t s = 0; s < shape_.n_slots; ++s) {
    if (!live_[s]) {
      live_[s] = true;
      lengths_[s] = 0;
      return s;
    }
  }
  return std::nullopt;
}

void KvCache::free(int64_t slot) {
  check_slot(slot);
  live_[slot] = false;
  lengths_[slot] = 0;
}

bool KvCache::is_live(int64_t slot) const {
  return slot >= 0 && slot < shape_.n_slots && live_[slot];
}

int64_t KvCache::n_free() const {
  int64_t n = 0;
  for (bool live : live_) n += live ? 0 : 1;
  return n;
}

int64_t KvCache::length(int64_t slot) const {
  check_slot(slot);
  return lengths_[slot];
}

void KvCache::check_room(int64_t slot, int64_t n_new) const {
  check_slot(slot);
  if (lengths_[slot] + n_new > shape_.capacity)
    throw Error("KV cache: sequence of " + std::to_string(lengths_[slot] + n_new) +
                " tokens exceeds the context capacity of " + std::to_string(shape_.capacity));
}

void KvCache::commit(int64_t slot, int64_t n_new) {
  check_room(slot, n_new);
  lengths_[slot] += n_new;
}

void KvCache::truncate(int64_t slot, int64_t new_length) {
  check_slot(slot);
  DSPARK_ASSERT(new_length >= 0 && new_length <= lengths_[slot]);
  lengths_[slot] = new_length;
}

void KvCache::copy_slot(int64_t src, int64_t dst) {
  check_slot(src);
  check_slot(dst);
  const int64_t n = lengths_[src];
  // bf16 keys: whole blocks (dimension 1 counts blocks); positions past n are never read.
  const int64_t key_rows = dtype_ == KvCacheDType::kBF16 ? (n + kKeyBlock - 1) / kKeyBlock : n;
  for (int64_t l = 0; l < shape_.n_layers; ++l) {
    keys_[l][dst].narrow(1, 0, key_rows).copy_(keys_[l][src].narrow(1, 0, key_rows));
    values_[l][dst].narrow(1, 0, n).copy_(values_[l][src].narrow(1, 0, n));
  }
  lengths_[dst] = n;
}

void KvCache::check_slot(int64_t slot) const {
  DSPARK_ASSERT(slot >= 0 && slot < shape_.n_slots && live_[slot]);
}

}  // namespace dspark::model
