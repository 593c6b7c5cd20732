#include "train/dspark_train_model.h"

#include "common/error.h"
#include "draft/dspark_network.h"

namespace dspark::train {

DSparkTrainModel::DSparkTrainModel(draft::DraftConfig config, const model::Transformer& target,
                                   const NamedTensors& tensors)
    : DrafterTrainModel(std::move(config), target, tensors) {
  if (config_.method == draft::DraftMethod::kEagle3) throw Error("DSparkTrainModel: an EAGLE-3 config was given");
}

DSparkTrainModel::Output DSparkTrainModel::forward(const torch::Tensor& features, const torch::Tensor& ids,
                                                   const std::vector<int64_t>& anchors) const {
  // Built from the parameters on every call: they change with every optimizer step.
  const draft::DSparkNetwork network(config_, Params(*this));
  draft::DSparkNetwork::BlockScores scores = network.teacher_forced(features, ids, anchors);
  return {std::move(scores.logits), std::move(scores.confidence_logits)};
}

}  // namespace dspark::train
