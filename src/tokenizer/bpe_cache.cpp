#include "tokenizer/bpe_cache.h"

#include <functional>

namespace dspark::tokenizer {

uint64_t BpeCache::hash_of(std::string_view word) { return std::hash<std::string_view>{}(word); }

bool BpeCache::matches(const Slot& slot, std::string_view word, uint64_t hash) const {
  return slot.hash == hash && slot.word_size == word.size() &&
         std::string_view(words_).substr(slot.word_offset, slot.word_size) == word;
}

bool BpeCache::lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const {
  std::lock_guard lock(mutex_);
  if (slots_.empty()) return false;
  for (size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    const Slot& slot = slots_[i];
    if (!slot.used) return false;
    if (matches(slot, word, hash)) {
      out.insert(out.end(), ids_.begin() + slot.ids_offset, ids_.begin() + slot.ids_offset + slot.n_ids);
      return true;
    }
  }
}

void BpeCache::store(std::string_view word, uint64_t hash, const int32_t* ids, size_t n_ids) {
  if (word.size() > kMaxWordBytes || n_ids > kMaxWordBytes) return;
  std::lock_guard lock(mutex_);
  if (slots_.empty() || n_entries_ >= kMaxEntries) clear();
  for (size_t i = hash & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    Slot& slot = slots_[i];
    if (slot.used && matches(slot, word, hash)) return;  // another thread stored it first
    if (slot.used) continue;
    slot = Slot{hash,
                static_cast<uint32_t>(words_.size()),
                static_cast<uint32_t>(ids_.size()),
                static_cast<uint16_t>(word.size()),
                static_cast<uint16_t>(n_ids),
                true};
    words_.append(word);
    ids_.insert(ids_.end(), ids, ids + n_ids);
    ++n_entries_;
    return;
  }
}

void BpeCache::clear() {
  slots_.assign(kSlots, Slot{});
  words_.clear();
  ids_.clear();
  n_entries_ = 0;
}

}  // namespace dspark::tokenizer
