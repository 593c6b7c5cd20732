#include "train/drafter_train_model.h"

#include <algorithm>

#include "common/error.h"
#include "train/dspark_train_model.h"
#include "train/eagle3_train_model.h"

namespace dspark::train {

DrafterTrainModel::DrafterTrainModel(draft::DraftConfig config, const model::Transformer& target,
                                     const NamedTensors& tensors)
    : config_(std::move(config)) {
  embed_ = target.embedding().to(torch::kFloat32);
  lm_head_ = target.lm_head_weight().to(torch::kFloat32);
  for (const auto& [name, t] : tensors) {
    if (name == "embed_tokens.weight" || name == "lm_head.weight") continue;
    trainable_.emplace_back(name, t.detach().to(target.device(), torch::kFloat32).clone().set_requires_grad(true));
  }
  // One order however the tensors arrived (fresh init or a checkpoint file): the gradient norm and
  // the optimizer walk them in this order, and resuming must repeat a run bit for bit.
  std::sort(trainable_.begin(), trainable_.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
}

int64_t DrafterTrainModel::slots() const {
  return config_.method == draft::DraftMethod::kEagle3 ? config_.ttt_length : config_.block_size;
}

const torch::Tensor& DrafterTrainModel::param(const std::string& name) const {
  for (const auto& [n, t] : trainable_)
    if (n == name) return t;
  throw Error("drafter checkpoint: tensor " + name + " is missing");
}

NamedTensors DrafterTrainModel::checkpoint_tensors() const {
  NamedTensors all{{"embed_tokens.weight", embed_}, {"lm_head.weight", lm_head_}};
  all.insert(all.end(), trainable_.begin(), trainable_.end());
  return all;
}

torch::Tensor DrafterTrainModel::Params::matrix(const std::string& name, const std::vector<int64_t>& shape) const {
  const torch::Tensor& t = model_.param(name);
  if (t.sizes() != torch::IntArrayRef(shape))
    throw Error("drafter checkpoint: tensor " + name + " has shape " + c10::str(t.sizes()) + ", expected " +
                c10::str(torch::IntArrayRef(shape)));
  return t;
}

torch::Tensor DrafterTrainModel::Params::vector(const std::string& name, const std::vector<int64_t>& shape) const {
  return matrix(name, shape);
}

model::DecoderLayer DrafterTrainModel::Params::layer(const std::string& p, const model::ModelConfig&,
                                                     int64_t) const {
  model::DecoderLayer layer;
  layer.input_norm = model_.param(p + "input_layernorm.weight");
  layer.qkv.weight = torch::cat({model_.param(p + "self_attn.q_proj.weight"), model_.param(p + "self_attn.k_proj.weight"),
                                 model_.param(p + "self_attn.v_proj.weight")});
  if (model_.config_.backbone.qk_norm) {
    layer.q_norm = model_.param(p + "self_attn.q_norm.weight");
    layer.k_norm = model_.param(p + "self_attn.k_norm.weight");
  }
  layer.o_proj.weight = model_.param(p + "self_attn.o_proj.weight");
  layer.post_norm = model_.param(p + "post_attention_layernorm.weight");
  layer.gate_up.weight = torch::cat({model_.param(p + "mlp.gate_proj.weight"), model_.param(p + "mlp.up_proj.weight")});
  layer.down.weight = model_.param(p + "mlp.down_proj.weight");
  return layer;
}

std::unique_ptr<DrafterTrainModel> make_drafter_train_model(const draft::DraftConfig& config,
                                                            const model::Transformer& target,
                                                            const NamedTensors& tensors) {
  if (config.method == draft::DraftMethod::kEagle3) return std::make_unique<Eagle3TrainModel>(config, target, tensors);
  return std::make_unique<DSparkTrainModel>(config, target, tensors);
}

}  // namespace dspark::train
