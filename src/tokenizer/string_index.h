// Open-addressing index from strings to int32 values whose strings live elsewhere: each slot keeps
// the value and the key's hash, and `key_of(value)` gives the string back for the final compare.
// Loading a 150k-token vocabulary does ~450k lookups, where node-based std::unordered_map spends
// most of the load time chasing pointers.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace dspark::tokenizer {

// Lets std::string-keyed standard maps be searched with a string_view, without a copy.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename KeyOf>  // callable: int32_t value -> std::string_view key
class StringIndex {
 public:
  StringIndex() = default;
  StringIndex(size_t n_keys, KeyOf key_of) : key_of_(std::move(key_of)) {
    size_t capacity = 16;
    while (capacity < n_keys * 2) capacity *= 2;
    slots_.assign(capacity, Slot{0, kEmpty});
    mask_ = capacity - 1;
  }

  // Maps `key` (== key_of(value)) to `value`, replacing an earlier value of the same key.
  void insert_or_assign(std::string_view key, int32_t value) {
    const uint64_t hash = hash_of(key);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.value == kEmpty || (slot.hash == hash && key_of_(slot.value) == key)) {
        slot = Slot{hash, value};
        return;
      }
    }
  }

  std::optional<int32_t> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    const uint64_t hash = hash_of(key);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.value == kEmpty) return std::nullopt;
      if (slot.hash == hash && key_of_(slot.value) == key) return slot.value;
    }
  }

 private:
  struct Slot {
    uint64_t hash;
    int32_t value;
  };
  static constexpr int32_t kEmpty = -1;  // values are ids or indices, never negative

  static uint64_t hash_of(std::string_view key) { return std::hash<std::string_view>{}(key); }

  KeyOf key_of_{};
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace dspark::tokenizer
