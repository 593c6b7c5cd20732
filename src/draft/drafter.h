// One interface for every drafter (DSpark, DFlash, EAGLE-3, n-gram).
//
// A drafter keeps per-request state in a slot: the committed tokens and, for model drafters, the
// draft KV cache over committed positions plus the target features not yet consumed. The draft
// cache never holds speculative tokens (deepspec-spec 2.6), so nothing is ever rolled back: a
// request's life is begin -> (propose -> commit)* -> end.
//
// Positions: after begin, `start` is the prompt length; the anchor is the token at `start` (the
// target's last output, not yet processed by the target). Proposal slot k is the token at
// start + k + 1. commit() receives the anchor plus the accepted drafts (positions
// start..start+a) and their target features, and start advances by a + 1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "sampling/rng.h"
#include "sampling/sampling.h"

namespace dspark::draft {

struct DraftBlock {
  std::vector<int64_t> tokens;     // [n] proposed tokens, n <= gamma
  torch::Tensor probs;             // [n, vocab] f32 CPU: q_k, the exact distribution tokens[k] was
                                   // drawn from (one-hot at greedy); undefined when n == 0
  std::vector<float> confidence;   // [n] c_k = P(slot k accepted | slots < k accepted); DSpark only
  torch::Tensor logits;            // [n, vocab] f32 CPU: the logits (Z_k for DSpark) each token's
                                   // distribution came from; only when DraftRequest::return_logits
};

struct DraftRequest {
  int64_t slot = 0;
  int64_t anchor = 0;              // token at position `start`
  int64_t gamma = 7;               // maximum proposal length
  double confidence_threshold = 0; // DSpark: stop before the first slot with c_k < threshold
  const sampling::SamplingParams* sampling = nullptr;
  sampling::Rng* rng = nullptr;    // the request's own stream
  bool return_logits = false;      // fill DraftBlock::logits (debugging, `dspark draft`)
};

class Drafter {
 public:
  virtual ~Drafter() = default;

  virtual std::string method() const = 0;  // "dspark", "dflash", "eagle3", "ngram"
  // 0-based target layers whose outputs the drafter reads, concatenated in this order into the
  // features passed to begin/commit ([n, m * hidden]); empty for drafters without a model.
  virtual const std::vector<int64_t>& target_layer_ids() const = 0;
  // Slots available; begin() takes a free slot index below this.
  virtual int64_t max_slots() const = 0;
  // The most drafts one proposal can hold (DSpark / DFlash: the block size); 0: no limit.
  virtual int64_t max_gamma() const { return 0; }
  // Whether a proposal from the slot's current position stays within the positions the drafter
  // can place (a block drafter writes its whole block, past the drafts a request still needs); the
  // engine decodes a request without drafts where it does not, as at the end of the context.
  virtual bool can_propose(int64_t /*slot*/) const { return true; }

  // After the target's prefill of `prompt_ids` (positions 0..n-1) with their features [n, m*d].
  virtual void begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) = 0;
  // One drafting call for several requests (each in its own slot); blocks come back in order.
  virtual std::vector<DraftBlock> propose(const std::vector<DraftRequest>& requests) = 0;
  // The anchor plus the accepted drafts, [a + 1] tokens at positions start..start+a, with their
  // target features [a + 1, m*d].
  virtual void commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) = 0;
  virtual void end(int64_t slot) = 0;
};

}  // namespace dspark::draft
