// Open-addressing hash map from a pair of token ids to the merge it allows (rank and result id).
// The BPE inner loop does one lookup per adjacent pair, so this avoids std::unordered_map's
// pointer chasing.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace dspark::tokenizer {

struct Merge {
  int32_t rank;    // position in the merges list: lower merges first
  int32_t result;  // id of the merged token
};

class MergeTable {
 public:
  explicit MergeTable(size_t n_merges = 0) {
    size_t capacity = 16;
    int log2_capacity = 4;
    while (capacity < n_merges * 2) {
      capacity *= 2;
      ++log2_capacity;
    }
    slots_.assign(capacity, Slot{kEmpty, {0, 0}});
    mask_ = capacity - 1;
    shift_ = 64 - log2_capacity;
  }

  // Keeps the first (lowest-rank) merge of a pair, as Hugging Face does for duplicated merges.
  void insert(int32_t left, int32_t right, Merge merge) {
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return;
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, merge};
        return;
      }
    }
  }

  std::optional<Merge> find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].merge;
      if (slots_[i].key == kEmpty) return std::nullopt;
    }
  }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative, so no pair packs to this

  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  // Fibonacci hashing: the top bits of the product mix both ids.
  size_t slot_of(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
};

}  // namespace dspark::tokenizer
