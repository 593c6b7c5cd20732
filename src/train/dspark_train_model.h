// DSpark / DFlash in training form: draft::DSparkNetwork (the drafter's own network) in its
// teacher-forced mode on the trainable parameters. All sampled blocks of a sequence run in one
// pass under the training block mask: a block's rows see the context strictly before its anchor
// (target features, as keys/values only) and every row of their own block; each slot's Markov
// previous token is the true one.
//
// The inference drafter (draft::DSparkDrafter) runs the same network one block at a time from a
// cache; tests/train/test_drafter_training.cpp checks the two agree.
#pragma once
#include <cstdint>
#include <vector>

#include "train/drafter_train_model.h"

namespace dspark::train {

class DSparkTrainModel : public DrafterTrainModel {
 public:
  DSparkTrainModel(draft::DraftConfig config, const model::Transformer& target, const NamedTensors& tensors);

  // Output::logits [n, B, V]: Z with the Markov bias, teacher-forced (the true previous token).
  Output forward(const torch::Tensor& features, const torch::Tensor& ids,
                 const std::vector<int64_t>& anchors) const override;
};

}  // namespace dspark::train
