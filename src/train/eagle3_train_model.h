// EAGLE-3 in training form: the training-time test (TTT) of deepspec-spec 3.2, unrolled over
// ttt_length steps for sampled rows of a sequence.
//
// Step 0 runs the layer over every position t (target feature fc(f_t) paired with the token at
// t + 1, RoPE position t), causal: these are the keys and values every later step attends to. A
// block anchored at a is the row t = a - 1 (the feature before the anchor paired with the anchor),
// the row the inference drafter's proposal starts from. Step s >= 1 feeds that row its own step
// s - 1 output with the token at t + s + 1, at RoPE position t + s, attending to the step-0 keys
// j <= t and to its own keys of steps 1..s (the diagonal). Step s drafts the token at a + s + 1.
//
// DeepSpec scores every row of the sequence at every step; running only the sampled rows beyond
// step 0 gives the same per-row gradients (a row's chain depends on the others only through the
// step-0 keys) and the same expected loss, at the cost of DSpark's blocks rather than 7 full
// passes of the LM head. The layer is the drafter's own (draft::Eagle3Layer) on the trainable
// parameters; tests/train/test_drafter_training.cpp checks it against the inference drafter
// (draft::Eagle3Drafter) step by step.
#pragma once
#include <cstdint>
#include <vector>

#include "train/drafter_train_model.h"

namespace dspark::train {

class Eagle3TrainModel : public DrafterTrainModel {
 public:
  Eagle3TrainModel(draft::DraftConfig config, const model::Transformer& target, const NamedTensors& tensors);

  // anchors ascending in [1, S-1]. Output::logits [n, ttt_length, V]: step s of block b drafts the
  // token at anchors[b] + s + 1, teacher-forced (step s reads the true token at anchors[b] + s).
  // No confidence head.
  Output forward(const torch::Tensor& features, const torch::Tensor& ids,
                 const std::vector<int64_t>& anchors) const override;

};

}  // namespace dspark::train
