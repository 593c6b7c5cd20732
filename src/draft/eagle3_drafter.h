// EAGLE-3 as in DeepSpec's Qwen3Eagle3Model (deepspec-spec 2.11): one decoder layer over
// [norm(embedding of token t+1) ; norm(g_t)], where g_t = fc(target features at t) at verified
// positions and the layer's own previous output at drafted ones; chain drafting, one token per
// step; RoPE position of row t is t.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "draft/draft_config.h"
#include "draft/drafter.h"
#include "draft/dspark_drafter.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/transformer.h"

namespace dspark::draft {

class Eagle3Drafter : public Drafter {
 public:
  static std::unique_ptr<Eagle3Drafter> load(const std::string& dir, const model::Transformer& target,
                                             const DrafterLoadOptions& options);

  std::string method() const override { return "eagle3"; }
  const std::vector<int64_t>& target_layer_ids() const override { return config_.target_layer_ids; }
  int64_t max_slots() const override { return static_cast<int64_t>(slots_.size()); }
  void begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) override;
  std::vector<DraftBlock> propose(const std::vector<DraftRequest>& requests) override;
  void commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) override;
  void end(int64_t slot) override;

  const DraftConfig& config() const { return config_; }

 private:
  Eagle3Drafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options);
  void load_weights(const std::string& dir, torch::ScalarType matrix_dtype);

  struct SlotState {
    bool active = false;
    std::vector<int64_t> tokens;         // committed tokens, positions 0..start-1
    std::vector<torch::Tensor> pending;  // target features of positions cache_len..start-1
  };
  struct Rows {                          // one forward's new rows, request after request
    std::vector<int64_t> slots, n_rows;  // per request
    torch::Tensor g;                     // [n, hidden] fc(features) or the previous output
    std::vector<int64_t> tokens;         // [n] the token paired with each row (at position + 1)
  };
  // Runs the layer on new rows appended to each slot's cache (causal), commits them to the
  // cache, and returns the layer outputs [n, hidden] (pre-norm).
  torch::Tensor layer_forward(const Rows& rows);
  SlotState& slot_state(int64_t slot);

  DraftConfig config_;
  const model::Transformer& target_;
  model::Rope rope_;
  model::KvCache cache_;
  std::vector<SlotState> slots_;
  torch::Tensor embed_;          // [vocab, hidden] (usually the target's)
  torch::Tensor lm_head_;        // [vocab, hidden] (usually the target's)
  model::Linear fc_;             // [hidden, m * hidden], no norm after it
  model::DecoderLayer layer_;    // qkv takes 2 * hidden inputs
  torch::Tensor hidden_norm_;    // [hidden]
  torch::Tensor norm_;           // [hidden] final norm before the LM head
};

}  // namespace dspark::draft
