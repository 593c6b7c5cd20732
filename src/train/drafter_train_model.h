// A drafter in training form: f32 parameters under DeepSpec names with autograd, the frozen target
// embedding and LM head, and one forward that scores sampled blocks of a sequence. DSpark / DFlash
// (dspark_train_model.h) and EAGLE-3 (eagle3_train_model.h) implement it by running the drafters'
// own networks (draft/dspark_network.h, draft/eagle3_layer.h) on these parameters; the trainer
// (drafter_trainer.h) sees only this interface.
//
// A block b is anchored at position a_b (an answer token): slot k of the block is the draft for
// the token at a_b + k + 1, the same indexing as the inference drafters' proposals.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "draft/draft_config.h"
#include "draft/drafter_weights.h"
#include "model/transformer.h"

namespace dspark::train {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

class DrafterTrainModel {
 public:
  struct Output {
    torch::Tensor logits;             // [n, slots, V] draft logits (DSpark: Markov bias included)
    torch::Tensor confidence_logits;  // [n, slots] (undefined without a confidence head)
  };

  // `tensors`: every tensor of a drafter checkpoint (DeepSpec names, any dtype); the trainable ones
  // become f32 leaves with grad. embed_tokens / lm_head are the target's, frozen.
  DrafterTrainModel(draft::DraftConfig config, const model::Transformer& target, const NamedTensors& tensors);
  virtual ~DrafterTrainModel() = default;

  // features: [S, m hidden] target features; ids: [S] int64 tokens; anchors ascending in [0, S-1].
  virtual Output forward(const torch::Tensor& features, const torch::Tensor& ids,
                         const std::vector<int64_t>& anchors) const = 0;

  const NamedTensors& trainable() const { return trainable_; }
  // Everything a checkpoint holds: trainable tensors plus the frozen embedding and LM head.
  NamedTensors checkpoint_tensors() const;
  const draft::DraftConfig& config() const { return config_; }
  // Draft tokens per block: DSpark / DFlash's block size, EAGLE-3's training-time-test length.
  int64_t slots() const;

 protected:
  // The trainable parameters as a network's weights (layers: fused views of their parameters).
  class Params : public draft::WeightSource {
   public:
    explicit Params(const DrafterTrainModel& model) : model_(model) {}
    torch::Tensor matrix(const std::string& name, const std::vector<int64_t>& shape) const override;
    torch::Tensor vector(const std::string& name, const std::vector<int64_t>& shape) const override;
    model::DecoderLayer layer(const std::string& prefix, const model::ModelConfig& config,
                              int64_t attention_input = 0) const override;
    torch::Tensor embed() const override { return model_.embed_; }
    torch::Tensor lm_head() const override { return model_.lm_head_; }

   private:
    const DrafterTrainModel& model_;
  };
  const torch::Tensor& param(const std::string& name) const;

  draft::DraftConfig config_;
  torch::Tensor embed_, lm_head_;  // [V, d], frozen (the target's)
  NamedTensors trainable_;
};

// The training form of the drafter `config` describes.
std::unique_ptr<DrafterTrainModel> make_drafter_train_model(const draft::DraftConfig& config,
                                                            const model::Transformer& target,
                                                            const NamedTensors& tensors);

}  // namespace dspark::train
