// Thread-safe memo of BPE results per word. Natural text repeats a small set of words, so most
// words skip the merge loop. Flat storage (one slot array, one arena for word bytes and one for
// ids) keeps a lookup to about two cache misses. Bounded: emptied when half full.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dspark::tokenizer {

class BpeCache {
 public:
  static constexpr size_t kSlots = size_t{1} << 18;  // a power of two
  static constexpr size_t kMaxEntries = kSlots / 2;  // keeps probe chains short
  static constexpr size_t kMaxWordBytes = 255;       // longer words are rare and not worth keeping

  static uint64_t hash_of(std::string_view word);

  // Appends the cached ids of `word` (whose hash_of is `hash`) to `out`; false when not cached.
  bool lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const;

  void store(std::string_view word, uint64_t hash, const int32_t* ids, size_t n_ids);

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t word_offset = 0;  // into words_
    uint32_t ids_offset = 0;   // into ids_
    uint16_t word_size = 0;
    uint16_t n_ids = 0;
    bool used = false;
  };

  bool matches(const Slot& slot, std::string_view word, uint64_t hash) const;
  void clear();

  mutable std::mutex mutex_;
  std::vector<Slot> slots_;  // allocated on the first store
  std::string words_;
  std::vector<int32_t> ids_;
  size_t n_entries_ = 0;
};

}  // namespace dspark::tokenizer
