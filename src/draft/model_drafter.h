// What the model-backed drafters (DSpark / DFlash, EAGLE-3) have in common: the target they read
// features from, the draft KV cache over committed positions, per-slot state (committed tokens,
// target features not yet consumed) with its validation, and loading (the checked config;
// DrafterWeights shares the target's embedding and LM head). Each drafter adds its network and
// propose().
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "draft/draft_config.h"
#include "draft/drafter.h"
#include "draft/drafter_weights.h"
#include "model/kv_cache.h"
#include "model/transformer.h"

namespace dspark::draft {

class ModelDrafter : public Drafter {
 public:
  const std::vector<int64_t>& target_layer_ids() const override { return config_.target_layer_ids; }
  int64_t max_slots() const override { return static_cast<int64_t>(slots_.size()); }
  void begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) override;
  void commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) override;
  void end(int64_t slot) override;

  const DraftConfig& config() const { return config_; }

 protected:
  // n_cache_layers: layers of the draft KV cache; lookahead: positions a proposal writes past the
  // committed ones (begin checks the cache has room for the prompt plus these).
  ModelDrafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options,
               int64_t n_cache_layers, int64_t lookahead);

  struct SlotState {
    bool active = false;
    std::vector<int64_t> tokens;         // committed tokens, positions 0..start-1
    std::vector<torch::Tensor> pending;  // [rows, m * hidden] f32 each: target features of
                                         // positions cache length..start-1, not yet consumed
    int64_t start() const { return static_cast<int64_t>(tokens.size()); }  // position of the anchor
    int64_t n_pending() const;  // rows of pending
  };
  SlotState& slot_state(int64_t slot);
  // The slot of a request in propose(): in range and begun.
  SlotState& active_slot(int64_t slot);
  // The slot's pending features in order (the caller consumes them); clears them.
  std::vector<torch::Tensor> take_pending(int64_t slot);

  DraftConfig config_;
  const model::Transformer& target_;
  model::KvCache cache_;
  std::vector<SlotState> slots_;
  int64_t lookahead_;
  bool tensor_ops_;  // the network runs through libtorch ops (not the CPU rows kernels)
};

// The DraftConfig of the drafter in `dir`, checked against the target and against the drafter
// kind that loads it (eagle3: whether it must be an EAGLE-3 drafter); dspark::Error otherwise.
DraftConfig load_checked_config(const std::string& dir, const model::Transformer& target, bool eagle3);

}  // namespace dspark::draft
