#include "model/gguf_loader.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/huge_pages.h"
#include "model/transformer.h"

namespace dspark::model {

namespace {

// "<arch>.<key>" as an integer; an error naming the key when absent.
int64_t arch_int(const GgufFile& f, const std::string& arch, const std::string& key) { return f.get_int(arch + "." + key); }

std::string layer_name(int64_t layer, const std::string& what) { return "blk." + std::to_string(layer) + "." + what; }

// Copies GGUF matrix `name` ([rows, cols], ggml ne {cols, rows}; a vector when rows is 1), dequantized, into `out` (a
// [rows, cols] tensor or view of any float dtype). permute_heads > 0 undoes llama.cpp's Llama q/k
// row permutation over that many heads.
void copy_matrix(const GgufFile& f, const std::string& name, int64_t rows, int64_t cols, int64_t permute_heads,
                 torch::Tensor out) {
  const GgufTensorInfo& info = f.tensor(name, rows == 1 ? std::vector<int64_t>{cols} : std::vector<int64_t>{cols, rows});
  std::vector<float> values = f.read_f32(info);
  torch::Tensor t = torch::from_blob(values.data(), {rows, cols}, torch::kFloat32);
  if (permute_heads > 0) {
    const int64_t half = rows / permute_heads / 2;
    t = t.view({permute_heads, half, 2, cols}).transpose(1, 2).reshape({rows, cols});
  }
  out.copy_(t);
}

// Matrices stacked by rows (q, k, v -> qkv; gate, up -> gate_up) in `dtype`, in huge pages as
// the safetensors path does.
struct RowPart {
  std::string name;
  int64_t rows;
  int64_t permute_heads = 0;
};
torch::Tensor read_stacked(const GgufFile& f, const std::vector<RowPart>& parts, int64_t cols, torch::ScalarType dtype) {
  int64_t rows = 0;
  for (const RowPart& p : parts) rows += p.rows;
  torch::Tensor stacked = empty_in_huge_pages({rows, cols}, dtype);
  int64_t first = 0;
  for (const RowPart& p : parts) {
    copy_matrix(f, p.name, p.rows, cols, p.permute_heads, stacked.narrow(0, first, p.rows));
    first += p.rows;
  }
  return stacked;
}

// Whether any of the parts is stored in `type`.
bool has_part_of(const GgufFile& f, const std::vector<RowPart>& parts, int64_t cols, GgmlType type) {
  for (const RowPart& p : parts)
    if (f.tensor(p.name, {cols, p.rows}).type == type) return true;
  return false;
}

// The parts' llama.cpp blocks, rows stacked (Llama's q/k rows un-permuted as copy_matrix does), when
// every part is stored in `type`: the matrix then runs on those very blocks. nullopt otherwise.
std::optional<QuantizedWeight> read_native_blocks(const GgufFile& f, const std::vector<RowPart>& parts, int64_t cols,
                                                  GgmlType type) {
  const kernels::QuantType quant = type == GgmlType::kQ8_0 ? kernels::QuantType::kQ8_0 : kernels::QuantType::kQ4_0;
  for (const RowPart& p : parts)
    if (f.tensor(p.name, {cols, p.rows}).type != type) return std::nullopt;
  // Parts are packed from where the file maps them; only a permuted one (Llama's q and k) is
  // gathered into its own buffer first.
  const size_t row_bytes = ggml_row_bytes(type, cols);
  std::vector<std::vector<uint8_t>> permuted;
  std::vector<QuantizedWeight::Part> blocks;
  for (const RowPart& p : parts) {
    const uint8_t* data = f.tensor(p.name).data;
    if (p.permute_heads == 0) {
      blocks.push_back({data, p.rows});
      continue;
    }
    std::vector<uint8_t>& rows_out = permuted.emplace_back(static_cast<size_t>(p.rows) * row_bytes);
    const int64_t half = p.rows / p.permute_heads / 2;
    for (int64_t r = 0; r < p.rows; ++r) {
      // output row (head, i, j) is stored row (head, j, i)
      const int64_t head = r / (2 * half), i = (r % (2 * half)) / half, j = r % half;
      const int64_t stored = head * 2 * half + 2 * j + i;
      std::memcpy(rows_out.data() + static_cast<size_t>(r) * row_bytes, data + static_cast<size_t>(stored) * row_bytes,
                  row_bytes);
    }
    blocks.push_back({rows_out.data(), p.rows});
  }
  return QuantizedWeight::from_parts(blocks, cols, quant);
}

torch::Tensor read_vector(const GgufFile& f, const std::string& name, int64_t size, int64_t permute_heads = 0) {
  torch::Tensor out = torch::empty({size}, torch::kFloat32);
  copy_matrix(f, name, 1, size, 0, out.view({1, size}));
  if (permute_heads > 0)  // a Llama q/k bias: the same row permutation as its matrix
    out = out.view({permute_heads, size / permute_heads / 2, 2}).transpose(1, 2).reshape({size}).contiguous();
  return out;
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "qwen3" && arch != "llama")
    f.fail("architecture '" + arch + "' is not supported (supported: qwen3, llama)");
  const int64_t hidden = arch_int(f, arch, "embedding_length");
  const int64_t n_heads = arch_int(f, arch, "attention.head_count");
  const int64_t head_dim = f.find_int(arch + ".attention.key_length").value_or(n_heads > 0 ? hidden / n_heads : 0);
  if (const auto value_length = f.find_int(arch + ".attention.value_length"); value_length && *value_length != head_dim)
    f.fail(arch + ".attention.value_length " + std::to_string(*value_length) + " differs from key_length " +
           std::to_string(head_dim) + " (not supported)");
  if (const auto rope_dims = f.find_int(arch + ".rope.dimension_count"); rope_dims && *rope_dims != head_dim)
    f.fail(arch + ".rope.dimension_count " + std::to_string(*rope_dims) + " differs from the head size " +
           std::to_string(head_dim) + " (partial rotary embeddings are not supported)");
  if (const auto scaling = f.find_string(arch + ".rope.scaling.type"); scaling && *scaling != "none")
    f.fail(arch + ".rope.scaling.type '" + *scaling + "' is not supported (supported: none; llama3 via rope_freqs)");
  if (!f.contains("token_embd.weight")) f.fail("tensor 'token_embd.weight' is missing");
  const GgufTensorInfo& embd = f.tensor("token_embd.weight");
  if (embd.ne.size() != 2) f.fail("tensor 'token_embd.weight' has shape " + format_ne(embd.ne) + ", expected 2 dimensions");

  nlohmann::json j;
  j["architectures"] = {arch == "qwen3" ? "Qwen3ForCausalLM" : "LlamaForCausalLM"};
  j["model_type"] = arch;
  j["vocab_size"] = f.find_int(arch + ".vocab_size").value_or(embd.ne[1]);
  j["hidden_size"] = hidden;
  j["intermediate_size"] = arch_int(f, arch, "feed_forward_length");
  j["num_hidden_layers"] = arch_int(f, arch, "block_count");
  j["num_attention_heads"] = n_heads;
  j["num_key_value_heads"] = f.find_int(arch + ".attention.head_count_kv").value_or(n_heads);
  j["head_dim"] = head_dim;
  j["rms_norm_eps"] = f.get_float(arch + ".attention.layer_norm_rms_epsilon");
  j["rope_theta"] = f.find_float(arch + ".rope.freq_base").value_or(10000.0);
  if (const auto context = f.find_int(arch + ".context_length")) j["max_position_embeddings"] = *context;
  j["tie_word_embeddings"] = !f.contains("output.weight");
  j["attention_bias"] = f.contains("blk.0.attn_q.bias");
  if (const auto bos = f.find_int("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *bos;
  std::vector<int64_t> eos;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (const auto id = f.find_int(key); id && std::find(eos.begin(), eos.end(), *id) == eos.end()) eos.push_back(*id);
  if (!eos.empty()) j["eos_token_id"] = eos;
  ModelConfig config = ModelConfig::from_json(j, f.path());
  if (f.contains("rope_freqs.weight")) {
    const GgufTensorInfo& freqs = f.tensor("rope_freqs.weight", {head_dim / 2});
    config.rope_freq_factors = f.read_f32(freqs);
  }
  return config;
}

namespace {

// What WeightDType::kAuto keeps for a GGUF file: Q8_0 or Q4_0, whichever more of its matrices
// hold, run natively (F / K-quant matrices quantized to that type at load, Q8_0 / Q4_0 ones kept
// as they are); else the type of its F32 / F16 / BF16 matrices (common_weight_dtype when they
// differ). A file of only K-quant matrices loads in bf16 (dequantized).
WeightDType gguf_weight_dtype(const GgufFile& f) {
  std::vector<WeightDType> dtypes;
  int64_t q8_0 = 0, q4_0 = 0;
  for (const GgufTensorInfo& info : f.tensors()) {
    if (info.ne.size() != 2) continue;
    q8_0 += info.type == GgmlType::kQ8_0;
    q4_0 += info.type == GgmlType::kQ4_0;
    if (info.type == GgmlType::kF32) dtypes.push_back(WeightDType::kF32);
    if (info.type == GgmlType::kF16) dtypes.push_back(WeightDType::kF16);
    if (info.type == GgmlType::kBF16) dtypes.push_back(WeightDType::kBF16);
  }
  if (q8_0 + q4_0 > 0) return q4_0 > q8_0 ? WeightDType::kQ4_0 : WeightDType::kQ8_0;
  return dtypes.empty() ? WeightDType::kBF16 : common_weight_dtype(dtypes);
}

// A quantized load keeps every Q8_0 or Q4_0 matrix of the file as it is, whichever of the two
// was asked for: rounding blocks of one format into the other only adds the second format's error
// to the first (q8_0 to q4_0 moved llama.cpp's reference logits by 3). So asking a file for the
// format its matrices are mostly not in would load it mostly as it is while claiming the type
// asked for: refused, as llama-quantize refuses to requantize unless asked. A file mostly of the
// format asked for (llama-quantize's Q8_0 fallbacks in a Q4_0 file) loads, its minority matrices
// kept; K-quants, which run nowhere natively, are quantized to the type asked for.
// `held` is what auto keeps of the file (gguf_weight_dtype).
void refuse_requantizing(const GgufFile& f, WeightDType held, WeightDType requested) {
  if (requested != WeightDType::kQ8_0 && requested != WeightDType::kQ4_0) return;
  if (held != WeightDType::kQ8_0 && held != WeightDType::kQ4_0) return;
  if (held != requested)
    throw Error(f.path() + ": its matrices are mostly " + (held == WeightDType::kQ8_0 ? "Q8_0" : "Q4_0") +
                " already; --dtype " + weight_dtype_name(requested) +
                " would quantize them again (use --dtype auto, or quantize the original checkpoint)");
}

}  // namespace

void Transformer::load_gguf_weights(const GgufFile& f) {
  const ModelConfig& c = config_;
  const WeightDType held = gguf_weight_dtype(f);
  refuse_requantizing(f, held, weight_dtype_);
  if (weight_dtype_ == WeightDType::kAuto) weight_dtype_ = held;
  const torch::ScalarType dtype = weight_scalar_type(weight_dtype_);
  // Quantized loads keep the file's blocks where they are of the type asked for (no second
  // rounding); anything else is read in f32 and quantized by quantize_weights().
  std::optional<GgmlType> native;
  if (weight_dtype_ == WeightDType::kQ8_0) native = GgmlType::kQ8_0;
  if (weight_dtype_ == WeightDType::kQ4_0) native = GgmlType::kQ4_0;
  auto linear = [&](const std::vector<RowPart>& parts, int64_t cols) {
    Linear l;
    if (native)
      for (const GgmlType type : {*native, *native == GgmlType::kQ8_0 ? GgmlType::kQ4_0 : GgmlType::kQ8_0})
        if (std::optional<QuantizedWeight> q = read_native_blocks(f, parts, cols, type)) {
          l.quantized = std::move(*q);
          return l;
        }
    l.weight = read_stacked(f, parts, cols, dtype);
    // A fused matrix whose parts mix Q8_0 and Q4_0 (one packed matrix has one block type) is
    // quantized to Q8_0, the finer of the two: rounding the Q8_0 part into Q4_0 would add Q4_0's
    // error to it, while Q8_0 holds the Q4_0 part's values to within a fraction of its own step.
    if (native && parts.size() > 1 && has_part_of(f, parts, cols, GgmlType::kQ8_0))
      l.quantize(kernels::QuantType::kQ8_0, "the fused matrix of " + parts.front().name);
    return l;
  };
  // llama.cpp permutes Llama's q and k rows for its RoPE layout; Qwen3's are stored as they are.
  const bool permuted = c.arch == Arch::kLlama;
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  Linear embedding = linear({{"token_embd.weight", c.vocab_size}}, c.hidden_size);
  embed_ = embedding.weight;
  if (c.tie_word_embeddings) lm_head_ = embedding;
  else embed_quantized_ = embedding.quantized;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    auto name = [&](const std::string& what) { return layer_name(l, what); };
    DecoderLayer layer;
    layer.input_norm = read_vector(f, name("attn_norm.weight"), c.hidden_size);
    layer.qkv = linear({{name("attn_q.weight"), q_dim, permuted ? c.n_heads : 0},
                        {name("attn_k.weight"), kv_dim, permuted ? c.n_kv_heads : 0},
                        {name("attn_v.weight"), kv_dim}},
                       c.hidden_size);
    layer.o_proj = linear({{name("attn_output.weight"), c.hidden_size}}, q_dim);
    if (c.attention_bias) {
      layer.qkv.bias = torch::cat({read_vector(f, name("attn_q.bias"), q_dim, permuted ? c.n_heads : 0),
                                   read_vector(f, name("attn_k.bias"), kv_dim, permuted ? c.n_kv_heads : 0),
                                   read_vector(f, name("attn_v.bias"), kv_dim)});
      layer.o_proj.bias = read_vector(f, name("attn_output.bias"), c.hidden_size);
    }
    if (c.qk_norm) {
      layer.q_norm = read_vector(f, name("attn_q_norm.weight"), c.head_dim);
      layer.k_norm = read_vector(f, name("attn_k_norm.weight"), c.head_dim);
    }
    layer.post_norm = read_vector(f, name("ffn_norm.weight"), c.hidden_size);
    layer.gate_up =
        linear({{name("ffn_gate.weight"), c.intermediate_size}, {name("ffn_up.weight"), c.intermediate_size}}, c.hidden_size);
    layer.down = linear({{name("ffn_down.weight"), c.hidden_size}}, c.intermediate_size);
    layers_.push_back(std::move(layer));
  }
  final_norm_ = read_vector(f, "output_norm.weight", c.hidden_size);
  if (!c.tie_word_embeddings) lm_head_ = linear({{"output.weight", c.vocab_size}}, c.hidden_size);
}

}  // namespace dspark::model
