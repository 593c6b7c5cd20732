// Refitting DSpark's confidence head on the drafter's own rollouts.
//
// The head c_k = sigmoid(w [h_k ; W1[x_{k-1}]] + b) (dspark-method.md eq. 7) is trained with the
// drafter, teacher-forced on the target's answers (eq. 11). Speculative generation feeds it other
// contexts: its own sampled drafts as x_{k-1}, and text the target samples at the request's
// temperature. On the default pair at T = 1 slot 1 is accepted 0.60 of the time against 0.86
// teacher-forced, and the head ranks acceptance at AUC 0.74 against 0.85 for the exact
// probabilities. A refit keeps eq. 7 and eq. 11 and changes only the data: real rollouts (the
// drafter proposing, the target verifying every slot) on training prompts, each slot's input
// [h_k ; W1[x_{k-1}]] as the drafter computed it and its exact target c*_k = 1 - TV(p_k, q_k).
// Only w and b move (W1 is the Markov head's and shapes the drafts), so the refit is a weighted
// logistic regression with soft labels, convex, solved by Newton's method.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "draft/dspark_drafter.h"
#include "engine/request.h"

namespace dspark::train {

// Rollout rounds of one request at a time: the inputs the confidence head saw and its exact targets.
struct ConfidenceRollouts {
  torch::Tensor hidden;  // [n, gamma, hidden] f32: h_k of each round's slots (0 past the proposal)
  torch::Tensor prev;    // [n, gamma] int64: x_{k-1}, the anchor at k = 0
  torch::Tensor exact;     // [n, gamma] f32: 1 - TV(p_k, q_k); NaN where the slot was not verified
  torch::Tensor accepted;  // [n] int64: drafts the target accepted in the round
};

// A DSpark drafter that remembers, for every proposal, h_k and x_{k-1} of each drafted slot. It
// drafts exactly as the wrapped drafter (tracing only copies tensors out). One request per
// propose() call (batch-1 rollouts), so proposals pair in order with the engine's DraftRounds.
class RolloutRecorder : public draft::Drafter {
 public:
  explicit RolloutRecorder(draft::DSparkDrafter& drafter);

  std::string method() const override { return drafter_.method(); }
  const std::vector<int64_t>& target_layer_ids() const override { return drafter_.target_layer_ids(); }
  int64_t max_slots() const override { return drafter_.max_slots(); }
  int64_t max_gamma() const override { return drafter_.max_gamma(); }
  void begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) override {
    drafter_.begin(slot, prompt_ids, features);
  }
  std::vector<draft::DraftBlock> propose(const std::vector<draft::DraftRequest>& requests) override;
  void commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) override {
    drafter_.commit(slot, tokens, features);
  }
  void end(int64_t slot) override { drafter_.end(slot); }

  // The recorded proposals joined with the engine's rounds that drafted (those with confidences:
  // same order, same count, else dspark::Error), gamma slots per round; clears the recording.
  ConfidenceRollouts take(const std::vector<engine::DraftRound>& rounds, int64_t gamma);

 private:
  struct Proposal {
    torch::Tensor hidden;        // [n, hidden]
    std::vector<int64_t> prev;   // [n]
  };
  draft::DSparkDrafter& drafter_;
  std::vector<Proposal> proposals_;
};

// Rounds of several rollouts, one after another.
ConfidenceRollouts concat(const std::vector<ConfidenceRollouts>& parts);

// The head's examples: every verified slot of every round. x [n, hidden + r] = [h_k ; W1[x_{k-1}]]
// (w1: the Markov head's [vocab, r] table; undefined: h_k alone), target [n] = c*_k,
// weight [n] = exp(-k / gamma), eq. 11's position weight (k 0-based).
struct ConfidenceExamples {
  torch::Tensor x;       // [n, width] f64
  torch::Tensor target;  // [n] f64
  torch::Tensor weight;  // [n] f64
  torch::Tensor slot;    // [n] int64, 0-based
};
ConfidenceExamples confidence_examples(const ConfidenceRollouts& rollouts, const torch::Tensor& w1);

struct ConfidenceFit {
  torch::Tensor weight;  // [1, width] f32
  torch::Tensor bias;    // [1] f32
  double loss = 0;       // the objective below at the fit
  int iterations = 0;
};

// Minimises sum_i weight_i BCE(target_i, sigmoid(x_i w + b)) / sum_i weight_i + l2 / 2 |w|^2
// (b unpenalised) by Newton's method from w = 0, b = 0, until the step's largest entry is below
// 1e-8 or max_iterations.
ConfidenceFit fit_confidence_head(const ConfidenceExamples& examples, double l2, int max_iterations = 50);

// The objective's data term (weighted mean BCE against soft targets) for logits [n].
double weighted_soft_bce(const torch::Tensor& logits, const ConfidenceExamples& examples);

}  // namespace dspark::train
