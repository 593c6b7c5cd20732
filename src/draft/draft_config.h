// A drafter's config.json in DeepSpec's layout (deepspec-spec 1.2): a copy of the target's config
// with the drafter's fields added. Architectures: "Qwen3DSparkModel" (DSpark and DFlash: DFlash is
// markov_rank 0 with the confidence head off) and "Qwen3Eagle3Model".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace dspark::draft {

enum class DraftMethod { kDSpark, kDFlash, kEagle3 };
std::string method_name(DraftMethod method);  // "dspark" | "dflash" | "eagle3"
DraftMethod parse_method(const std::string& name);  // throws dspark::Error

enum class MarkovHead { kNone, kVanilla, kRnn };
MarkovHead parse_markov_head(const std::string& name);  // "vanilla" | "rnn"; throws dspark::Error

struct DraftConfig {
  DraftMethod method = DraftMethod::kDSpark;
  model::ModelConfig backbone;             // shapes of the drafter's layers (num_hidden_layers = draft layers)
  int64_t num_target_layers = 0;
  std::vector<int64_t> target_layer_ids;   // strictly increasing, never the target's last layer
  // DSpark / DFlash
  int64_t block_size = 7;                  // slots per block = drafts per round (gamma)
  int64_t mask_token_id = -1;
  int64_t markov_rank = 0;
  MarkovHead markov_head = MarkovHead::kNone;
  bool confidence_head = false;
  bool confidence_with_markov = true;
  // EAGLE-3
  int64_t ttt_length = 7;

  // path: config.json or its directory. Throws dspark::Error naming the file and the field.
  static DraftConfig load(const std::string& path);
  static DraftConfig from_json(const nlohmann::json& j, const std::string& source);
  nlohmann::json to_json() const;
  // Throws if the drafter cannot run on this target (vocab, hidden size, layer ids).
  void check_target(const model::ModelConfig& target, const std::string& source) const;
};

// DeepSpec's spread of feature layers: 1, 1 + s, ..., with s = (L - 4) / (m - 1) (gives
// [1, 9, 17, 25, 33] for 36 layers and [1, 10, 19, 28, 37] for 40), or the first m layers
// when the target is too shallow for that. Never includes the last layer.
std::vector<int64_t> default_target_layer_ids(int64_t n_target_layers, int64_t n_features = 5);

}  // namespace dspark::draft
