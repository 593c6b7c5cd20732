#include "model/gguf_export.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "model/config.h"
#include "model/gguf_writer.h"
#include "model/safetensors.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/tokenizer_gguf.h"
#include "tokenizer/tokenizer_json.h"

namespace dspark::model {

namespace {

namespace fs = std::filesystem;
using Metadata = std::vector<std::pair<std::string, GgufValue>>;

// Hugging Face suffix within a layer -> llama.cpp's.
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> names = {
      {"self_attn.q_proj.weight", "attn_q.weight"},       {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},       {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},           {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},           {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},  {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},        {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},        {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
  };
  return names;
}

// A checkpoint tensor's values as f32, [rows, cols] row-major.
std::vector<float> read_values(const TensorView& view) {
  std::vector<float> values(static_cast<size_t>(view.numel()));
  const auto* u16 = static_cast<const uint16_t*>(view.data);
  switch (view.dtype) {
    case DType::kF32: std::copy_n(static_cast<const float*>(view.data), values.size(), values.begin()); break;
    case DType::kF16: for (size_t i = 0; i < values.size(); ++i) values[i] = f16_to_f32(u16[i]); break;
    case DType::kBF16: for (size_t i = 0; i < values.size(); ++i) values[i] = bf16_to_f32(u16[i]); break;
  }
  return values;
}

// llama.cpp's converter permutation of Llama's q/k rows: within each head, row (half h, i) moves
// to (i, half h), interleaving the two rotary halves.
std::vector<float> permute_rows(const std::vector<float>& values, int64_t rows, int64_t cols, int64_t n_heads) {
  std::vector<float> out(values.size());
  const int64_t head_rows = rows / n_heads, half = head_rows / 2;
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t i = 0; i < half; ++i)
        std::copy_n(values.begin() + ((h * head_rows + part * half + i) * cols), cols,
                    out.begin() + ((h * head_rows + i * 2 + part) * cols));
  return out;
}

// The llama.cpp pre-tokenizer name whose split regex (and normalisation) the tokenizer has.
std::string pre_tokenizer_name(const tokenizer::TokenizerSpec& spec, const std::string& origin) {
  for (const char* name : {"qwen2", "llama-bpe", "gpt-2"}) {
    const auto pre = tokenizer::gguf_pre_tokenizer(name);
    if (spec.splits.size() == 1 && spec.splits[0].pattern == tokenizer::to_pcre2_pattern(pre->pattern) &&
        !spec.splits[0].literal && spec.nfc == pre->nfc)
      return name;
  }
  throw Error(origin + ": the tokenizer's pre-tokenizer matches none llama.cpp names (qwen2, llama-bpe, gpt-2)");
}

void add_tokenizer(Metadata& md, const std::string& model_dir, const ModelConfig& config) {
  const fs::path json_file = fs::path(model_dir) / "tokenizer.json";
  if (!fs::exists(json_file)) return;
  const tokenizer::TokenizerSpec spec = tokenizer::read_tokenizer_json(json_file);
  const tokenizer::TokenizerConfig tok_config = tokenizer::TokenizerConfig::load_from_directory(model_dir);
  std::vector<std::string> tokens(static_cast<size_t>(config.vocab_size));
  std::vector<int32_t> types(tokens.size(), 5);  // unused
  std::map<std::string, int32_t> id_of;
  auto put = [&](int32_t id, const std::string& token, int32_t type) {
    if (id < 0 || id >= config.vocab_size)
      throw Error(json_file.string() + ": token id " + std::to_string(id) + " is outside the model's vocabulary of " +
                  std::to_string(config.vocab_size));
    tokens[id] = token;
    types[id] = type;
    id_of[token] = id;
  };
  for (const auto& [token, id] : spec.bpe.vocab) put(id, token, 1);  // normal
  for (const tokenizer::AddedToken& t : spec.added_tokens) put(t.id, t.content, t.special ? 3 : 4);  // control / user-defined
  for (size_t id = 0; id < tokens.size(); ++id)
    if (types[id] == 5) tokens[id] = "[PAD" + std::to_string(id) + "]";
  std::vector<std::string> merges;
  merges.reserve(spec.bpe.merges.size());
  for (const auto& [left, right] : spec.bpe.merges) merges.push_back(left + " " + right);

  md.emplace_back("tokenizer.ggml.model", gguf_string("gpt2"));
  md.emplace_back("tokenizer.ggml.pre", gguf_string(pre_tokenizer_name(spec, json_file.string())));
  md.emplace_back("tokenizer.ggml.tokens", gguf_strings(std::move(tokens)));
  md.emplace_back("tokenizer.ggml.token_type", gguf_int32s(types));
  md.emplace_back("tokenizer.ggml.merges", gguf_strings(std::move(merges)));
  auto add_id = [&](const char* key, const std::optional<std::string>& token) {
    if (token && id_of.count(*token)) md.emplace_back(key, gguf_uint32(static_cast<uint32_t>(id_of[*token])));
  };
  add_id("tokenizer.ggml.eos_token_id", tok_config.eos_token);
  add_id("tokenizer.ggml.padding_token_id", tok_config.pad_token);
  if (config.bos_token_id) md.emplace_back("tokenizer.ggml.bos_token_id", gguf_uint32(static_cast<uint32_t>(*config.bos_token_id)));
  md.emplace_back("tokenizer.ggml.add_bos_token", gguf_bool(false));
  if (tok_config.chat_template) md.emplace_back("tokenizer.chat_template", gguf_string(*tok_config.chat_template));
}

Metadata model_metadata(const ModelConfig& c, GgmlType type, const std::string& model_dir) {
  const std::string arch = arch_name(c.arch);
  Metadata md;
  md.emplace_back("general.architecture", gguf_string(arch));
  md.emplace_back("general.type", gguf_string("model"));
  md.emplace_back("general.name", gguf_string(fs::path(model_dir).filename().string()));
  md.emplace_back(arch + ".block_count", gguf_uint32(static_cast<uint32_t>(c.n_layers)));
  md.emplace_back(arch + ".context_length", gguf_uint32(static_cast<uint32_t>(c.max_position_embeddings)));
  md.emplace_back(arch + ".embedding_length", gguf_uint32(static_cast<uint32_t>(c.hidden_size)));
  md.emplace_back(arch + ".feed_forward_length", gguf_uint32(static_cast<uint32_t>(c.intermediate_size)));
  md.emplace_back(arch + ".attention.head_count", gguf_uint32(static_cast<uint32_t>(c.n_heads)));
  md.emplace_back(arch + ".attention.head_count_kv", gguf_uint32(static_cast<uint32_t>(c.n_kv_heads)));
  md.emplace_back(arch + ".rope.freq_base", gguf_float32(static_cast<float>(c.rope_theta)));
  md.emplace_back(arch + ".attention.layer_norm_rms_epsilon", gguf_float32(static_cast<float>(c.rms_norm_eps)));
  md.emplace_back(arch + ".attention.key_length", gguf_uint32(static_cast<uint32_t>(c.head_dim)));
  md.emplace_back(arch + ".attention.value_length", gguf_uint32(static_cast<uint32_t>(c.head_dim)));
  md.emplace_back(arch + ".vocab_size", gguf_uint32(static_cast<uint32_t>(c.vocab_size)));
  if (c.arch == Arch::kLlama) md.emplace_back(arch + ".rope.dimension_count", gguf_uint32(static_cast<uint32_t>(c.head_dim)));
  md.emplace_back("general.file_type", gguf_uint32(gguf_file_type(type)));
  if (type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0) md.emplace_back("general.quantization_version", gguf_uint32(2));
  add_tokenizer(md, model_dir, c);
  return md;
}

}  // namespace

std::string gguf_tensor_name(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const auto it = layer_names().find(hf.substr(dot + 1));
  return it == layer_names().end() ? "" : "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + it->second;
}

uint32_t gguf_file_type(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return 0;   // LLAMA_FTYPE_ALL_F32
    case GgmlType::kF16: return 1;   // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::kQ4_0: return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case GgmlType::kQ8_0: return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgmlType::kBF16: return 32; // LLAMA_FTYPE_MOSTLY_BF16
    default: throw Error(std::string("GGUF export: type ") + ggml_type_name(type) + " is not supported");
  }
}

void export_gguf(const std::string& model_dir, GgmlType type, const std::string& out_path) {
  if (!can_quantize(type))
    throw Error(std::string("GGUF export: type ") + ggml_type_name(type) + " is not supported (f32, f16, bf16, q8_0, q4_0)");
  const ModelConfig config = ModelConfig::load(model_dir);
  if (!config.rope_scaling.type.empty())
    throw Error(model_dir + ": rope_scaling '" + config.rope_scaling.type + "' cannot be exported to GGUF yet");
  const SafetensorsArchive archive = SafetensorsArchive::open(model_dir);
  const int64_t block = ggml_type_info(static_cast<uint32_t>(type))->block_size;

  // Tensors in convert_hf_to_gguf's order: embeddings, final norm, head, then each layer.
  std::vector<std::string> hf_names = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!config.tie_word_embeddings) hf_names.push_back("lm_head.weight");
  for (int64_t l = 0; l < config.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* s : {"self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                          "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                          "self_attn.o_proj.weight", "self_attn.o_proj.bias", "self_attn.q_norm.weight",
                          "self_attn.k_norm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"})
      if (archive.contains(p + s)) hf_names.push_back(p + s);
  }
  std::vector<GgufTensorToWrite> tensors;
  for (const std::string& hf : hf_names) {
    const TensorView& view = archive.get(hf);
    if (view.shape.empty() || view.shape.size() > 2)
      throw Error(view.file + ": tensor '" + hf + "' has " + std::to_string(view.shape.size()) + " dimensions");
    const bool is_matrix = view.shape.size() == 2;
    const int64_t cols = view.shape.back(), rows = is_matrix ? view.shape[0] : 1;
    const GgmlType tensor_type = is_matrix ? type : GgmlType::kF32;
    if (is_matrix && cols % block != 0)
      throw Error(view.file + ": tensor '" + hf + "' has rows of " + std::to_string(cols) + " values, not a multiple of " +
                  ggml_type_name(type) + "'s block of " + std::to_string(block));
    int64_t permute_heads = 0;
    if (config.arch == Arch::kLlama && hf.find("self_attn.q_proj.") != std::string::npos) permute_heads = config.n_heads;
    if (config.arch == Arch::kLlama && hf.find("self_attn.k_proj.") != std::string::npos) permute_heads = config.n_kv_heads;
    GgufTensorToWrite t;
    t.name = gguf_tensor_name(hf);
    t.type = tensor_type;
    t.ne = is_matrix ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{cols};
    t.write_data = [&view, tensor_type, rows, cols, permute_heads](std::vector<uint8_t>& out) {
      std::vector<float> values = read_values(view);
      if (permute_heads > 0)  // a bias vector permutes like the matrix's rows
        values = rows > 1 ? permute_rows(values, rows, cols, permute_heads) : permute_rows(values, cols, 1, permute_heads);
      out.resize(ggml_row_bytes(tensor_type, cols) * static_cast<size_t>(rows));
      quantize_row(tensor_type, values.data(), out.data(), rows * cols);
    };
    tensors.push_back(std::move(t));
  }
  write_gguf(out_path, model_metadata(config, type, model_dir), tensors);
}

}  // namespace dspark::model
