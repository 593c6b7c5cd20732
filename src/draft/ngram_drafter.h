// Prompt lookup decoding (llama.cpp's `lookup`, vLLM's n-gram speculator): no model, the draft is
// copied from the request's own history. The longest suffix of history + anchor (max_ngram tokens
// down to min_ngram) is looked up at its most recent earlier occurrence, and up to gamma of the
// tokens that followed that occurrence are proposed.
//
// The drafter is deterministic, so its q is one-hot at each proposed token: rejection sampling then
// accepts x with probability p(x) and stays exact, and no randomness is consumed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "draft/drafter.h"

namespace dspark::draft {

class NgramDrafter : public Drafter {
 public:
  // Throws dspark::Error unless max_slots > 0, vocab_size > 0 and 1 <= min_ngram <= max_ngram.
  NgramDrafter(int64_t max_slots, int64_t vocab_size, int64_t max_ngram = 3, int64_t min_ngram = 1);

  std::string method() const override { return "ngram"; }
  const std::vector<int64_t>& target_layer_ids() const override { return no_layers_; }
  int64_t max_slots() const override { return static_cast<int64_t>(slots_.size()); }

  // `features` are ignored (there is no model); only the token history is kept.
  void begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) override;
  std::vector<DraftBlock> propose(const std::vector<DraftRequest>& requests) override;
  void commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) override;
  void end(int64_t slot) override;

 private:
  struct SlotState {
    bool active = false;
    std::vector<int64_t> history;  // tokens at positions 0..start-1: prompt, then committed tokens
  };

  SlotState& active_slot(int64_t slot, const char* action);
  void check_tokens(const std::vector<int64_t>& tokens, const char* what) const;
  DraftBlock propose_one(const DraftRequest& request);

  int64_t vocab_size_;
  int64_t max_ngram_;
  int64_t min_ngram_;
  std::vector<SlotState> slots_;
  std::vector<int64_t> no_layers_;  // always empty: no target features are read
};

// The lookup itself, exposed so it can be tested on plain sequences: the tokens that followed the
// most recent earlier occurrence of the longest suffix of `context` of length max_ngram down to
// min_ngram, at most `gamma` of them; empty when no suffix recurs.
std::vector<int64_t> ngram_lookup(const std::vector<int64_t>& context, int64_t gamma, int64_t max_ngram,
                                  int64_t min_ngram);

}  // namespace dspark::draft
