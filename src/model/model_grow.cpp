#include "model/model_grow.h"

#include <map>

#include "common/error.h"
#include "model/safetensors.h"
#include "model/transformer.h"

namespace dspark::model {

namespace {

using nlohmann::json;

json rope_scaling_of(const ModelConfig& c) {
  const auto it = c.raw.find("rope_scaling");
  return it == c.raw.end() ? json() : *it;
}

void check_fits(const ModelConfig& s, const ModelConfig& b, const std::string& small_dir) {
  auto refuse = [&](const std::string& what) {
    throw Error("cannot grow " + small_dir + " into the given config: " + what);
  };
  if (s.arch != b.arch) refuse("the architectures differ");
  if (s.vocab_size != b.vocab_size) refuse("the vocabularies differ");
  if (s.head_dim != b.head_dim) refuse("the head sizes differ");
  if (s.rope_theta != b.rope_theta || rope_scaling_of(s) != rope_scaling_of(b)) refuse("the RoPE settings differ");
  if (s.rms_norm_eps != b.rms_norm_eps) refuse("the norm epsilons differ");
  if (s.qk_norm != b.qk_norm) refuse("one has q/k norms, the other not");
  if (s.tie_word_embeddings != b.tie_word_embeddings) refuse("one ties its embeddings, the other not");
  if (s.attention_bias || b.attention_bias) refuse("attention biases are not supported");
  if (b.n_layers < s.n_layers || b.n_heads < s.n_heads || b.n_kv_heads < s.n_kv_heads ||
      b.intermediate_size < s.intermediate_size)
    refuse("the new model has fewer layers, heads, KV heads or MLP neurons");
  if (s.n_heads * b.n_kv_heads != b.n_heads * s.n_kv_heads) refuse("the heads per KV head differ");
  if (b.hidden_size % s.hidden_size != 0)
    refuse("hidden size " + std::to_string(b.hidden_size) + " is not a multiple of " + std::to_string(s.hidden_size));
}

}  // namespace

InitialWeights grown_weights(const std::string& small_dir, const ModelConfig& big, uint64_t seed) {
  const ModelConfig small = ModelConfig::load(small_dir);
  check_fits(small, big, small_dir);
  const SafetensorsArchive archive = SafetensorsArchive::open(small_dir);
  // A small tensor as f32 (each is read once); the archive names a missing one.
  auto get = [&](const std::string& name) {
    const TensorView& view = archive.get(name);
    return torch::from_blob(const_cast<void*>(view.data), view.shape, to_scalar_type(view.dtype)).to(torch::kFloat32);
  };
  const int64_t k = big.hidden_size / small.hidden_size;
  const double kd = static_cast<double>(k);
  // Readers of the residual stream: [rows, small hidden] -> [rows, big hidden].
  auto reads = [&](const torch::Tensor& t) { return t.repeat({1, k}) / kd; };
  // Writers of it: [small hidden, cols] -> [big hidden, cols].
  auto writes = [&](const torch::Tensor& t) { return t.repeat({k, 1}); };

  std::map<int64_t, int64_t> source_layer;  // big layer -> small layer
  for (int64_t i = 0; i < small.n_layers; ++i) source_layer[i * big.n_layers / small.n_layers] = i;

  InitialWeights weights = random_weights(big, seed);
  torch::NoGradGuard no_grad;
  for (auto& [spec, t] : weights) {
    const std::string& name = spec.name;
    if (name == "model.embed_tokens.weight") {
      t.copy_(get(name).repeat({1, k}));
      continue;
    }
    if (name == "lm_head.weight") {
      t.copy_(reads(get(name)));
      continue;
    }
    if (name == "model.norm.weight") {
      t.copy_(get(name).repeat({k}) / (big.tie_word_embeddings ? kd : 1.0));
      continue;
    }
    // model.layers.<b>.<part>
    static const std::string kLayers = "model.layers.";
    const size_t dot = name.find('.', kLayers.size());
    const int64_t b = std::stoll(name.substr(kLayers.size(), dot - kLayers.size()));
    const std::string part = name.substr(dot + 1);
    const bool output = part == "self_attn.o_proj.weight" || part == "mlp.down_proj.weight";
    if (output) t.zero_();
    const auto from = source_layer.find(b);
    if (from == source_layer.end()) continue;  // an identity layer: random, its outputs zero
    const torch::Tensor s = get("model.layers." + std::to_string(from->second) + "." + part);
    if (part == "input_layernorm.weight" || part == "post_attention_layernorm.weight")
      t.copy_(s.repeat({k}));
    else if (part == "self_attn.q_norm.weight" || part == "self_attn.k_norm.weight")
      t.copy_(s);
    else if (output)  // the small heads' / neurons' columns; the new ones stay zero
      t.slice(1, 0, s.size(1)).copy_(writes(s));
    else  // q/k/v, gate/up: the small heads / KV heads / neurons are the first rows
      t.slice(0, 0, s.size(0)).copy_(reads(s));
  }
  return weights;
}

}  // namespace dspark::model
