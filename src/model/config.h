// Hugging Face config.json / generation_config.json for the architectures we run (Qwen3, Llama).
//
// Accepts both transformers-4 and transformers-5 spellings (torch_dtype / dtype, rope_theta +
// rope_scaling / rope_parameters). Every problem (invalid JSON, missing key, wrong type, an
// unsupported feature, inconsistent sizes) is a dspark::Error whose one line names the file.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dspark::model {

enum class Arch { kQwen3, kLlama };
const char* arch_name(Arch arch);  // HF model_type: "qwen3", "llama"

struct RopeScaling {  // llama3-style rope_scaling; key "rope_type" (or legacy "type") == "llama3"
  std::string type;   // "" when none (absent, null or rope_type "default")
  double factor = 1, low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Arch arch = Arch::kQwen3;
  std::string architecture;  // architectures[0], e.g. "Qwen3ForCausalLM" or "Qwen3DSparkModel"
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0;
  int64_t n_layers = 0, n_heads = 0, n_kv_heads = 0;
  int64_t head_dim = 0;  // "head_dim", else hidden_size / n_heads
  double rms_norm_eps = 1e-6, rope_theta = 10000;
  RopeScaling rope_scaling;
  // Per-frequency divisors of the rotary frequencies ([head_dim / 2]; llama.cpp's rope_freqs
  // tensor, how GGUF files carry llama3 scaling); empty when none.
  std::vector<float> rope_freq_factors;
  bool tie_word_embeddings = false;  // absent -> false (Qwen3Config and LlamaConfig default)
  bool qk_norm = false;              // per-head RMSNorm on q and k: Qwen3 yes, Llama no
  bool attention_bias = false;       // bias on q/k/v/o projections ("attention_bias")
  int64_t max_position_embeddings = 0;  // absent -> HF default (Qwen3 32768, Llama 2048)
  std::string torch_dtype;              // "bfloat16", "float16", "float32"; "" when absent
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // eos_token_id may be an int or a list; empty when absent
  nlohmann::json raw;                  // the whole file, for drafter-specific keys

  // path: config.json or the directory holding it. allow_any_architecture admits configs whose
  // architectures[0] is not a supported CausalLM (e.g. DeepSpec's "Qwen3DSparkModel"); the
  // architecture is then taken from model_type, which must be qwen3 or llama.
  static ModelConfig load(const std::string& path, bool allow_any_architecture = false);
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source_name,
                               bool allow_any_architecture = false);
  // HF-compatible config.json (transformers-4 spelling): raw with every field above written over.
  nlohmann::json to_json() const;
  // Throws dspark::Error "<what>: N positions exceed the model's max_position_embeddings (M)" when
  // a sequence of n positions does not fit (no limit when the config gives none).
  void check_positions(int64_t n, const std::string& what) const;
};

struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0 = off. Note: HF uses 50 when a generation_config.json omits top_k.
  double top_p = 1.0;
  double min_p = 0.0;

  // Reads <model_dir>/generation_config.json (model_dir may also be a file inside the directory).
  // Absent file -> these defaults with the model's eos ids; absent or null keys -> the defaults.
  // A .gguf model_dir: the defaults with the model's eos ids (GGUF stores no sampling settings).
  static GenerationConfig load_or_default(const std::string& model_dir, const ModelConfig& model);
  nlohmann::json to_json() const;
};

}  // namespace dspark::model
