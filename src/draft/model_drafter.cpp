#include "draft/model_drafter.h"

#include "common/error.h"

namespace dspark::draft {

DraftConfig load_checked_config(const std::string& dir, const model::Transformer& target, bool eagle3) {
  DraftConfig config = DraftConfig::load(dir);
  if (eagle3 && config.method != DraftMethod::kEagle3) throw Error(dir + ": not an EAGLE-3 drafter");
  if (!eagle3 && config.method == DraftMethod::kEagle3) throw Error(dir + ": an EAGLE-3 drafter, not DSpark/DFlash");
  config.check_target(target.config(), dir + "/config.json");
  return config;
}

ModelDrafter::ModelDrafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options,
                           int64_t n_cache_layers, int64_t lookahead)
    : config_(std::move(config)),
      target_(target),
      cache_(model::KvCacheShape{n_cache_layers, options.max_slots, options.capacity, config_.backbone.n_kv_heads,
                                 config_.backbone.head_dim},
             target.device()),
      slots_(options.max_slots),
      lookahead_(lookahead),
      tensor_ops_(options.force_tensor_ops || !target.device().is_cpu() || target.kernels() == model::Kernels::kTensorOps) {
  for (int64_t i = 0; i < options.max_slots; ++i) cache_.allocate();
}

ModelDrafter::SlotState& ModelDrafter::slot_state(int64_t slot) {
  if (slot < 0 || slot >= static_cast<int64_t>(slots_.size()))
    throw Error("drafter slot " + std::to_string(slot) + " out of range [0, " + std::to_string(slots_.size()) + ")");
  return slots_[slot];
}

ModelDrafter::SlotState& ModelDrafter::active_slot(int64_t slot) {
  SlotState& s = slot_state(slot);
  if (!s.active) throw Error("drafter propose: slot " + std::to_string(slot) + " has no request");
  return s;
}

int64_t ModelDrafter::SlotState::n_pending() const {
  int64_t n = 0;
  for (const torch::Tensor& t : pending) n += t.size(0);
  return n;
}

std::vector<torch::Tensor> ModelDrafter::take_pending(int64_t slot) {
  std::vector<torch::Tensor> pending = std::move(slots_[slot].pending);
  slots_[slot].pending.clear();
  return pending;
}

void ModelDrafter::begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) {
  SlotState& s = slot_state(slot);
  const int64_t width = config_.backbone.hidden_size * static_cast<int64_t>(config_.target_layer_ids.size());
  if (features.dim() != 2 || features.size(0) != static_cast<int64_t>(prompt_ids.size()) || features.size(1) != width)
    throw Error("drafter begin: features must be [prompt tokens, " + std::to_string(width) + "]");
  cache_.truncate(slot, 0);
  cache_.check_room(slot, features.size(0) + lookahead_);
  s.active = true;
  s.tokens = prompt_ids;
  s.pending = {features.to(torch::kFloat32)};
}

void ModelDrafter::commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) {
  SlotState& s = slot_state(slot);
  if (!s.active) throw Error("drafter commit: slot " + std::to_string(slot) + " has no request");
  if (features.dim() != 2 || features.size(0) != static_cast<int64_t>(tokens.size()))
    throw Error("drafter commit: one feature row per committed token is needed");
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  s.pending.push_back(features.to(torch::kFloat32));
}

void ModelDrafter::end(int64_t slot) {
  slot_state(slot) = SlotState{};
  cache_.truncate(slot, 0);
}

}  // namespace dspark::draft
