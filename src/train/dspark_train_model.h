// DSpark / DFlash in training form (deepspec-spec 2.3-2.9, 4.3): f32 parameters under DeepSpec
// names with autograd, and the block-parallel forward in which all sampled blocks of a sequence run
// in one pass under the training block mask: a block's rows see the context strictly before its
// anchor (target features, as keys/values only) and every row of their own block.
//
// The inference drafter (draft::DSparkDrafter) runs the same maths one block at a time from a
// cache; tests/train/test_dspark_train_model.cpp checks the two agree.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "draft/draft_config.h"
#include "model/rope.h"
#include "model/transformer.h"

namespace dspark::train {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// [n B, S + n B] true where query row (block b, slot k) may attend to the key: context position
// j < anchors[b], or any slot of block b. Row-major blocks, context keys first.
torch::Tensor block_attention_mask(const std::vector<int64_t>& anchors, int64_t seq_len, int64_t block_size);

class DSparkTrainModel {
 public:
  // `tensors`: every tensor of a drafter checkpoint (DeepSpec names, any dtype); the trainable ones
  // become f32 leaves with grad. embed_tokens / lm_head are the target's, frozen.
  DSparkTrainModel(draft::DraftConfig config, const model::Transformer& target, const NamedTensors& tensors);

  struct Output {
    torch::Tensor logits;             // [n, B, V] Z (Markov bias included, teacher-forced)
    torch::Tensor confidence_logits;  // [n, B] (undefined without the head)
  };
  // features: [S, m hidden] target features; ids: [S] int64 tokens; anchors ascending in [0, S-1].
  Output forward(const torch::Tensor& features, const torch::Tensor& ids, const std::vector<int64_t>& anchors) const;

  const NamedTensors& trainable() const { return trainable_; }
  // Everything a checkpoint holds: trainable tensors plus the frozen embedding and LM head.
  NamedTensors checkpoint_tensors() const;
  const draft::DraftConfig& config() const { return config_; }

 private:
  const torch::Tensor& param(const std::string& name) const;
  torch::Tensor attention(const model::DecoderLayer& layer, const torch::Tensor& x, const torch::Tensor& context,
                          const torch::Tensor& cos_b, const torch::Tensor& sin_b, const torch::Tensor& cos_c,
                          const torch::Tensor& sin_c, const torch::Tensor& mask) const;
  model::DecoderLayer layer(int64_t l) const;  // fused views of layer l's parameters

  draft::DraftConfig config_;
  model::Rope rope_;
  torch::Tensor embed_, lm_head_;  // [V, d], frozen (the target's)
  NamedTensors trainable_;
};

}  // namespace dspark::train
