#include "draft/ngram_drafter.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace dspark::draft {

namespace {

// Start of the most recent occurrence of context[end - n, end) that begins before end - n, or -1.
int64_t last_earlier_occurrence(const std::vector<int64_t>& context, int64_t n) {
  const int64_t end = static_cast<int64_t>(context.size());
  const auto suffix = context.begin() + (end - n);
  for (int64_t i = end - n - 1; i >= 0; --i)
    if (std::equal(suffix, context.end(), context.begin() + i)) return i;
  return -1;
}

// [n, vocab] f32 rows one-hot at each token: the exact distribution a deterministic drafter draws from.
torch::Tensor one_hot_rows(const std::vector<int64_t>& tokens, int64_t vocab) {
  const auto n = static_cast<int64_t>(tokens.size());
  torch::Tensor index = torch::tensor(tokens, torch::kInt64).view({n, 1});
  return torch::zeros({n, vocab}, torch::kFloat32).scatter_(1, index, 1.0);
}

}  // namespace

std::vector<int64_t> ngram_lookup(const std::vector<int64_t>& context, int64_t gamma, int64_t max_ngram,
                                  int64_t min_ngram) {
  const auto size = static_cast<int64_t>(context.size());
  // A suffix needs at least one earlier token to have an earlier occurrence.
  for (int64_t n = std::min(max_ngram, size - 1); n >= min_ngram && gamma > 0; --n) {
    const int64_t i = last_earlier_occurrence(context, n);
    if (i < 0) continue;
    // i + n <= size - 1, so at least one token follows the match.
    const int64_t from = i + n, to = std::min(from + gamma, size);
    return {context.begin() + from, context.begin() + to};
  }
  return {};
}

NgramDrafter::NgramDrafter(int64_t max_slots, int64_t vocab_size, int64_t max_ngram, int64_t min_ngram)
    : vocab_size_(vocab_size), max_ngram_(max_ngram), min_ngram_(min_ngram) {
  if (max_slots <= 0) throw Error("ngram drafter: max_slots must be > 0, got " + std::to_string(max_slots));
  if (vocab_size <= 0) throw Error("ngram drafter: vocab_size must be > 0, got " + std::to_string(vocab_size));
  if (min_ngram < 1 || min_ngram > max_ngram)
    throw Error("ngram drafter: need 1 <= min_ngram <= max_ngram, got min_ngram " + std::to_string(min_ngram) +
                ", max_ngram " + std::to_string(max_ngram));
  slots_.resize(max_slots);
}

NgramDrafter::SlotState& NgramDrafter::active_slot(int64_t slot, const char* action) {
  if (slot < 0 || slot >= max_slots())
    throw Error(std::string("ngram drafter: ") + action + " on slot " + std::to_string(slot) + ", outside [0, " +
                std::to_string(max_slots()) + ")");
  SlotState& state = slots_[slot];
  if (!state.active)
    throw Error(std::string("ngram drafter: ") + action + " on slot " + std::to_string(slot) +
                ", which has not begun");
  return state;
}

void NgramDrafter::check_tokens(const std::vector<int64_t>& tokens, const char* what) const {
  for (int64_t t : tokens)
    if (t < 0 || t >= vocab_size_)
      throw Error(std::string("ngram drafter: ") + what + " token " + std::to_string(t) + " outside [0, " +
                  std::to_string(vocab_size_) + ")");
}

void NgramDrafter::begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& /*features*/) {
  if (slot < 0 || slot >= max_slots())
    throw Error("ngram drafter: begin on slot " + std::to_string(slot) + ", outside [0, " +
                std::to_string(max_slots()) + ")");
  if (slots_[slot].active) throw Error("ngram drafter: begin on slot " + std::to_string(slot) + ", already in use");
  check_tokens(prompt_ids, "prompt");
  slots_[slot] = SlotState{true, prompt_ids};
}

DraftBlock NgramDrafter::propose_one(const DraftRequest& request) {
  SlotState& state = active_slot(request.slot, "propose");
  check_tokens({request.anchor}, "anchor");
  if (request.gamma < 0) throw Error("ngram drafter: gamma must be >= 0, got " + std::to_string(request.gamma));
  // The anchor is the newest token; it takes part in the match but is committed only later.
  state.history.push_back(request.anchor);
  DraftBlock block;
  block.tokens = ngram_lookup(state.history, request.gamma, max_ngram_, min_ngram_);
  state.history.pop_back();
  if (!block.tokens.empty()) block.probs = one_hot_rows(block.tokens, vocab_size_);
  return block;
}

std::vector<DraftBlock> NgramDrafter::propose(const std::vector<DraftRequest>& requests) {
  std::vector<DraftBlock> blocks;
  blocks.reserve(requests.size());
  for (const DraftRequest& request : requests) blocks.push_back(propose_one(request));
  return blocks;
}

void NgramDrafter::commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& /*features*/) {
  SlotState& state = active_slot(slot, "commit");
  if (tokens.empty()) throw Error("ngram drafter: commit on slot " + std::to_string(slot) + " without the anchor");
  check_tokens(tokens, "committed");
  state.history.insert(state.history.end(), tokens.begin(), tokens.end());
}

void NgramDrafter::end(int64_t slot) { active_slot(slot, "end") = SlotState{}; }

}  // namespace dspark::draft
