#include "model/kv_cache.h"

#include <string>

#include "common/error.h"

namespace dspark::model {

const char* kv_cache_dtype_name(KvCacheDType dtype) { return dtype == KvCacheDType::kBF16 ? "bf16" : "f32"; }

torch::ScalarType kv_cache_scalar_type(KvCacheDType dtype) {
  return dtype == KvCacheDType::kBF16 ? torch::kBFloat16 : torch::kFloat32;
}

KvCache::KvCache(const KvCacheShape& shape, const torch::Device& device, KvCacheDType dtype)
    : shape_(shape), dtype_(dtype), lengths_(shape.n_slots, 0), live_(shape.n_slots, false) {
  auto options = torch::TensorOptions().dtype(kv_cache_scalar_type(dtype)).device(device);
  for (int64_t l = 0; l < shape.n_layers; ++l) {
    keys_.push_back(torch::zeros({shape.n_slots, shape.n_kv_heads, shape.capacity, shape.head_dim}, options));
    values_.push_back(torch::zeros({shape.n_slots, shape.n_kv_heads, shape.capacity, shape.head_dim}, options));
  }
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
  for (int64_t l = 0; l < shape_.n_layers; ++l) {
    keys_[l][dst].narrow(1, 0, n).copy_(keys_[l][src].narrow(1, 0, n));
    values_[l][dst].narrow(1, 0, n).copy_(values_[l][src].narrow(1, 0, n));
  }
  lengths_[dst] = n;
}

void KvCache::check_slot(int64_t slot) const {
  DSPARK_ASSERT(slot >= 0 && slot < shape_.n_slots && live_[slot]);
}

}  // namespace dspark::model
