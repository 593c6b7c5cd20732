// DSpark / DFlash in training form (deepspec-spec 2.3-2.9, 4.3): the block-parallel forward in
// which all sampled blocks of a sequence run in one pass under the training block mask: a block's
// rows see the context strictly before its anchor (target features, as keys/values only) and
// every row of their own block.
//
// The inference drafter (draft::DSparkDrafter) runs the same maths one block at a time from a
// cache; tests/train/test_drafter_training.cpp checks the two agree.
#pragma once
#include <cstdint>
#include <vector>

#include "train/drafter_train_model.h"

namespace dspark::train {

// [n B, S + n B] true where query row (block b, slot k) may attend to the key: context position
// j < anchors[b], or any slot of block b. Row-major blocks, context keys first.
torch::Tensor block_attention_mask(const std::vector<int64_t>& anchors, int64_t seq_len, int64_t block_size);

class DSparkTrainModel : public DrafterTrainModel {
 public:
  DSparkTrainModel(draft::DraftConfig config, const model::Transformer& target, const NamedTensors& tensors);

  // Output::logits [n, B, V]: Z with the Markov bias, teacher-forced (the true previous token).
  Output forward(const torch::Tensor& features, const torch::Tensor& ids,
                 const std::vector<int64_t>& anchors) const override;

 private:
  torch::Tensor attention(const model::DecoderLayer& layer, const torch::Tensor& x, const torch::Tensor& context,
                          const torch::Tensor& cos_b, const torch::Tensor& sin_b, const torch::Tensor& cos_c,
                          const torch::Tensor& sin_c, const torch::Tensor& mask) const;
};

}  // namespace dspark::train
