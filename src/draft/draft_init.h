// Random-init drafters in DeepSpec's checkpoint layout, for a given target (tests, benchmarks,
// and the starting point of `dspark train drafter`).
#pragma once
#include <cstdint>
#include <string>

#include "draft/draft_config.h"
#include "model/transformer.h"

namespace dspark::draft {

struct DrafterInitOptions {
  DraftMethod method = DraftMethod::kDSpark;
  uint64_t seed = 0;
  int64_t n_layers = 0;        // 0: 1 for EAGLE-3; DSpark/DFlash 5 (DeepSpec) on targets of 24+ layers, else 2
  int64_t block_size = 7;     // DSpark / DFlash slots per block; EAGLE-3 ttt_length
  int64_t markov_rank = 0;     // 0: min(256, hidden / 8) for DSpark (DeepSpec's 256 on targets of hidden >= 2048)
  MarkovHead markov_head = MarkovHead::kVanilla;
  int64_t mask_token_id = -1;  // -1: the target tokenizer's "<|mask|>", else vocab_size - 1
  std::vector<int64_t> target_layer_ids;  // empty: default_target_layer_ids(target layers)
};

// The config a drafter for this target gets with these options.
DraftConfig make_draft_config(const model::ModelConfig& target, const DrafterInitOptions& options);

// A fresh drafter's tensors under DeepSpec names (f32 on the CPU): embed_tokens / lm_head copied
// from the target, matrices N(0, initializer_range), norms 1, biases 0.
std::vector<std::pair<std::string, torch::Tensor>> random_drafter_tensors(const model::Transformer& target,
                                                                         const DraftConfig& config, uint64_t seed);

// Writes a drafter in DeepSpec's layout: config.json and model.safetensors (bf16).
void write_drafter(const DraftConfig& config, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                   const std::string& out_dir);

// random_drafter_tensors, written with write_drafter.
void write_random_drafter(const model::Transformer& target, const DraftConfig& config, const std::string& out_dir,
                          uint64_t seed);

}  // namespace dspark::draft
