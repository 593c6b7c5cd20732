#include "draft/draft_config.h"

#include <filesystem>

#include "common/error.h"
#include "common/json_file.h"

namespace dspark::draft {

using nlohmann::json;

std::string method_name(DraftMethod method) {
  switch (method) {
    case DraftMethod::kDSpark: return "dspark";
    case DraftMethod::kDFlash: return "dflash";
    case DraftMethod::kEagle3: return "eagle3";
  }
  return "?";
}

DraftMethod parse_method(const std::string& name) {
  if (name == "dspark") return DraftMethod::kDSpark;
  if (name == "dflash") return DraftMethod::kDFlash;
  if (name == "eagle3") return DraftMethod::kEagle3;
  throw Error("unknown drafter method '" + name + "' (expected dspark, dflash or eagle3)");
}

MarkovHead parse_markov_head(const std::string& name) {
  if (name == "vanilla") return MarkovHead::kVanilla;
  if (name == "rnn") return MarkovHead::kRnn;
  throw Error("unknown Markov head '" + name + "' (expected vanilla or rnn)");
}

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw Error(source + ": " + what); }

int64_t get_int(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || !j[key].is_number_integer()) fail(source, std::string("missing or non-integer \"") + key + "\"");
  return j[key].get<int64_t>();
}

}  // namespace

DraftConfig DraftConfig::from_json(const json& j, const std::string& source) {
  DraftConfig c;
  if (!j.is_object()) fail(source, "not a JSON object");
  const json& arch = j.value("architectures", json::array());
  const std::string architecture = arch.is_array() && !arch.empty() && arch[0].is_string() ? arch[0].get<std::string>() : "";
  c.backbone = model::ModelConfig::from_json(j, source, /*allow_any_architecture=*/true);
  c.num_target_layers = get_int(j, "num_target_layers", source);
  if (!j.contains("target_layer_ids") || !j["target_layer_ids"].is_array()) fail(source, "missing \"target_layer_ids\"");
  for (const json& id : j["target_layer_ids"]) {
    if (!id.is_number_integer()) fail(source, "\"target_layer_ids\" must hold integers");
    c.target_layer_ids.push_back(id.get<int64_t>());
  }
  if (c.target_layer_ids.empty()) fail(source, "\"target_layer_ids\" is empty");
  for (size_t i = 0; i < c.target_layer_ids.size(); ++i) {
    const int64_t id = c.target_layer_ids[i];
    if (id < 0 || id >= c.num_target_layers - 1)
      fail(source, "target layer id " + std::to_string(id) + " must be in [0, num_target_layers - 1) (the last layer is not a feature)");
    if (i > 0 && id <= c.target_layer_ids[i - 1]) fail(source, "\"target_layer_ids\" must be strictly increasing");
  }
  if (architecture == "Qwen3DSparkModel" || architecture == "LlamaDSparkModel") {
    c.block_size = get_int(j, "block_size", source);
    c.mask_token_id = get_int(j, "mask_token_id", source);
    c.markov_rank = j.value("markov_rank", int64_t{0});
    c.confidence_head = j.value("enable_confidence_head", false);
    c.confidence_with_markov = j.value("confidence_head_with_markov", true);
    if (c.block_size < 1) fail(source, "\"block_size\" must be >= 1");
    if (c.mask_token_id < 0 || c.mask_token_id >= c.backbone.vocab_size) fail(source, "\"mask_token_id\" out of range");
    if (c.markov_rank < 0) fail(source, "\"markov_rank\" must be >= 0");
    if (c.markov_rank > 0) {
      const std::string type = j.value("markov_head_type", std::string("vanilla"));
      if (type == "vanilla") c.markov_head = MarkovHead::kVanilla;
      else if (type == "rnn") c.markov_head = MarkovHead::kRnn;
      else fail(source, "unsupported markov_head_type \"" + type + "\" (supported: vanilla, rnn)");
    }
    if (c.confidence_head && c.confidence_with_markov && c.markov_rank == 0)
      fail(source, "confidence_head_with_markov needs markov_rank > 0");
    c.method = c.markov_rank == 0 && !c.confidence_head ? DraftMethod::kDFlash : DraftMethod::kDSpark;
  } else if (architecture == "Qwen3Eagle3Model" || architecture == "LlamaEagle3Model") {
    c.method = DraftMethod::kEagle3;
    c.ttt_length = j.value("ttt_length", int64_t{7});
    if (c.backbone.n_layers != 1) fail(source, "EAGLE-3 drafters have exactly one layer");
  } else {
    fail(source, "unsupported drafter architecture \"" + architecture +
                     "\" (expected Qwen3DSparkModel or Qwen3Eagle3Model)");
  }
  return c;
}

DraftConfig DraftConfig::load(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  return from_json(read_json_file(file), file);
}

json DraftConfig::to_json() const {
  json j = backbone.to_json();
  j["num_target_layers"] = num_target_layers;
  j["target_layer_ids"] = target_layer_ids;
  j["tie_word_embeddings"] = false;
  j["layer_types"] = std::vector<std::string>(backbone.n_layers, "full_attention");
  if (method == DraftMethod::kEagle3) {
    j["architectures"] = {"Qwen3Eagle3Model"};
    j["draft_num_hidden_layers"] = backbone.n_layers;
    j["ttt_length"] = ttt_length;
    j["step_loss_decay"] = 0.8;
    return j;
  }
  j["architectures"] = {"Qwen3DSparkModel"};
  j["block_size"] = block_size;
  j["mask_token_id"] = mask_token_id;
  j["enable_confidence_head"] = confidence_head;
  if (confidence_head) j["confidence_head_with_markov"] = confidence_with_markov;
  j["markov_rank"] = markov_rank;
  if (markov_rank > 0) j["markov_head_type"] = markov_head == MarkovHead::kRnn ? "rnn" : "vanilla";
  return j;
}

void DraftConfig::check_target(const model::ModelConfig& target, const std::string& source) const {
  if (backbone.vocab_size != target.vocab_size)
    fail(source, "vocab_size " + std::to_string(backbone.vocab_size) + " differs from the target's " +
                     std::to_string(target.vocab_size));
  if (backbone.hidden_size != target.hidden_size)
    fail(source, "hidden_size " + std::to_string(backbone.hidden_size) + " differs from the target's " +
                     std::to_string(target.hidden_size));
  if (num_target_layers != target.n_layers)
    fail(source, "made for a target of " + std::to_string(num_target_layers) + " layers; this target has " +
                     std::to_string(target.n_layers));
  // A block takes block_size positions after its anchor: one longer than the target's context
  // could never be placed, and sizing buffers for it once took all the machine's memory.
  if (target.max_position_embeddings > 0 && block_size >= target.max_position_embeddings)
    fail(source, "block_size " + std::to_string(block_size) + " does not fit the target's max_position_embeddings (" +
                     std::to_string(target.max_position_embeddings) + ")");
}

std::vector<int64_t> default_target_layer_ids(int64_t n_layers, int64_t n_features) {
  std::vector<int64_t> ids;
  const int64_t step = n_features > 1 ? (n_layers - 4) / (n_features - 1) : 0;
  if (step >= 1) {
    for (int64_t i = 0; i < n_features; ++i) ids.push_back(1 + step * i);
    return ids;
  }
  for (int64_t i = 0; i < std::min(n_features, n_layers - 1); ++i) ids.push_back(i);
  return ids;
}

}  // namespace dspark::draft
