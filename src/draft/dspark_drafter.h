// DSpark (and DFlash, its heads switched off) as a drafter: the network of dspark_network.h run
// from the draft KV cache.
//
// Parallel stage: one backbone pass over a block [anchor, M, ..., M] (M = mask token), with the
// target's features entering every layer as keys/values only, for positions strictly before the
// anchor. Every slot k yields h_k and base logits U_k, predicting the token at anchor + k + 1.
// Sequential stage (DSpark): Z_k = U_k + W2 W1[x_{k-1}] (x_{-1} = anchor), sampled left to right
// from the same sampling transform the verifier applies, with the confidence
// c_k = sigmoid(w [h_k ; W1[x_{k-1}]] + b). DFlash samples every slot from U_k independently.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "draft/draft_config.h"
#include "draft/dspark_network.h"
#include "draft/model_drafter.h"
#include "model/transformer.h"

namespace dspark::draft {


// One block's intermediate tensors, for reference checks and `dspark draft`.
struct BlockTrace {
  torch::Tensor hidden;       // [block_size, hidden] h_k (final-normed)
  torch::Tensor base_logits;  // [block_size, vocab] U_k
};

class DSparkDrafter : public ModelDrafter {
 public:
  // dir: DeepSpec layout (config.json + safetensors). embed_tokens / lm_head, when stored, must
  // equal the target's; the target's tensors are used either way. `target` must outlive this.
  static std::unique_ptr<DSparkDrafter> load(const std::string& dir, const model::Transformer& target,
                                             const DrafterLoadOptions& options);

  std::string method() const override { return method_name(config_.method); }
  int64_t max_gamma() const override { return config_.block_size; }
  // The block [anchor, M, ...] takes positions start .. start + block_size - 1, all of which must
  // lie below max_position_embeddings.
  bool can_propose(int64_t slot) const override;
  std::vector<DraftBlock> propose(const std::vector<DraftRequest>& requests) override;

  // Sequential Temperature Scaling (dspark-method.md 4.2): c_k = sigmoid(logit_k / T_k), one T per
  // slot (missing slots: 1). `dspark calibrate` fits them and saves them as sts.json beside the
  // weights, which load() applies. Empty: the raw confidences.
  void set_confidence_temperatures(const std::vector<double>& temperatures);
  const std::vector<float>& confidence_temperatures() const { return confidence_temperatures_; }
  // Set by propose() for each request when tracing is on (tests, `dspark draft`).
  void set_tracing(bool on) { tracing_ = on; }
  const std::vector<BlockTrace>& last_traces() const { return traces_; }
  // The network itself (its heads' weights), for refitting the confidence head on rollouts.
  const DSparkNetwork& network() const { return network_; }

 private:
  DSparkDrafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options,
                const DrafterWeights& weights);

  // The network's backbone over the requests' pending context and blocks: returns h
  // [n_req * block_size, hidden] and commits the context rows' keys/values to the draft cache.
  torch::Tensor backbone(const std::vector<DraftRequest>& requests);

  DSparkNetwork network_;
  std::vector<float> confidence_temperatures_;  // STS, per slot
  bool tracing_ = false;
  std::vector<BlockTrace> traces_;
};

}  // namespace dspark::draft
