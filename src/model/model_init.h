// Writes random-weight checkpoints in Hugging Face layout (config.json, generation_config.json,
// model.safetensors), for tests and benchmarks. Never commit large generated models.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model/config.h"

namespace dspark::model {

struct TensorSpec {
  std::string name;            // Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
  bool is_norm;                // RMSNorm weights start at 1, matrices are N(0, initializer_range)
};

// Every tensor of a Qwen3/Llama checkpoint for this config, in file order.
std::vector<TensorSpec> hf_checkpoint_layout(const ModelConfig& config);

struct InitOptions {
  uint64_t seed = 0;
  int64_t max_shard_bytes = 0;  // > 0: write model-0000i-of-0000n.safetensors shards + index
};

using InitialWeights = std::vector<std::pair<TensorSpec, torch::Tensor>>;  // f32, in file order

// The random initial weights: norms 1, matrices N(0, initializer_range), drawn in file order from
// one generator seeded with `seed`.
InitialWeights random_weights(const ModelConfig& config, uint64_t seed);

// Creates out_dir (if needed) and writes config.json, generation_config.json and the weights,
// stored in config.torch_dtype ("bfloat16" or "float32").
void write_checkpoint(const ModelConfig& config, const std::string& out_dir, const InitialWeights& weights,
                      const InitOptions& options);

// write_checkpoint of random_weights(config, options.seed).
void write_random_checkpoint(const ModelConfig& config, const std::string& out_dir, const InitOptions& options);

}  // namespace dspark::model
