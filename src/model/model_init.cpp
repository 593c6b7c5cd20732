#include "model/model_init.h"

#include <filesystem>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "common/error.h"
#include "common/json_file.h"
#include "model/safetensors.h"

namespace dspark::model {

std::vector<TensorSpec> hf_checkpoint_layout(const ModelConfig& c) {
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  std::vector<TensorSpec> specs{{"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, false}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {c.hidden_size}, true});
    specs.push_back({p + "self_attn.q_proj.weight", {q_dim, c.hidden_size}, false});
    specs.push_back({p + "self_attn.k_proj.weight", {kv_dim, c.hidden_size}, false});
    specs.push_back({p + "self_attn.v_proj.weight", {kv_dim, c.hidden_size}, false});
    if (c.attention_bias) {
      specs.push_back({p + "self_attn.q_proj.bias", {q_dim}, false});
      specs.push_back({p + "self_attn.k_proj.bias", {kv_dim}, false});
      specs.push_back({p + "self_attn.v_proj.bias", {kv_dim}, false});
      specs.push_back({p + "self_attn.o_proj.bias", {c.hidden_size}, false});
    }
    if (c.qk_norm) {
      specs.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, true});
      specs.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, true});
    }
    specs.push_back({p + "self_attn.o_proj.weight", {c.hidden_size, q_dim}, false});
    specs.push_back({p + "post_attention_layernorm.weight", {c.hidden_size}, true});
    specs.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}, false});
    specs.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size}, false});
    specs.push_back({p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}, false});
  }
  specs.push_back({"model.norm.weight", {c.hidden_size}, true});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}, false});
  return specs;
}

InitialWeights random_weights(const ModelConfig& config, uint64_t seed) {
  const double stddev = config.raw.value("initializer_range", 0.02);
  at::Generator generator = at::detail::createCPUGenerator(seed);
  InitialWeights weights;
  for (TensorSpec& spec : hf_checkpoint_layout(config)) {
    torch::Tensor t = spec.is_norm ? torch::ones(spec.shape) : torch::randn(spec.shape, generator) * stddev;
    weights.emplace_back(std::move(spec), std::move(t));
  }
  return weights;
}

void write_checkpoint(const ModelConfig& config, const std::string& out_dir, const InitialWeights& weights,
                      const InitOptions& options) {
  const std::filesystem::path dir(out_dir);
  std::filesystem::create_directories(dir);
  const bool bf16 = config.torch_dtype != "float32";
  std::vector<torch::Tensor> tensors;  // keeps the converted data alive until written
  std::vector<TensorToWrite> to_write;
  for (const auto& [spec, weight] : weights) {
    torch::Tensor t = weight.to(bf16 ? torch::kBFloat16 : torch::kFloat32).contiguous();
    to_write.push_back({spec.name, bf16 ? DType::kBF16 : DType::kF32, spec.shape, t.data_ptr(),
                        static_cast<size_t>(t.numel() * t.element_size())});
    tensors.push_back(std::move(t));
  }
  if (options.max_shard_bytes > 0)
    write_sharded_safetensors(dir.string(), to_write, options.max_shard_bytes);
  else
    write_safetensors((dir / "model.safetensors").string(), to_write);

  nlohmann::json json = config.to_json();
  json["torch_dtype"] = bf16 ? "bfloat16" : "float32";
  write_json_file(dir / "config.json", json);
  GenerationConfig generation;
  generation.eos_token_ids = config.eos_token_ids;
  write_json_file(dir / "generation_config.json", generation.to_json());
}

void write_random_checkpoint(const ModelConfig& config, const std::string& out_dir, const InitOptions& options) {
  write_checkpoint(config, out_dir, random_weights(config, options.seed), options);
}

}  // namespace dspark::model
