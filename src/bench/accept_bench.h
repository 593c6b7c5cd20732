// `dspark bench accept`: DeepSpec's acceptance protocol (deepspec-spec 5): batch 1, fixed seeds,
// the first user turn of each prompt rendered with the chat template (non-thinking, no system
// prompt), speculative generation at a given temperature and gamma, statistics pooled over all
// rounds of a prompt file. One drafter and one prompt file per call; the CLI makes the table.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "draft/drafter.h"
#include "engine/speculative.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace dspark::bench {

// The prompts of a DeepSpec-style JSONL file: the first string of each line's "turns" array.
// format "turns" (DeepSpec, shared/data/eval) or "instruction" (Self-Instruct's user-oriented file:
// "instruction" plus the first instance's "input").
std::vector<std::string> read_prompts(const std::string& file, const std::string& format, int64_t limit);

struct AcceptOptions {
  double temperature = 1.0;
  int64_t gamma = 7;
  int64_t max_tokens = 256;
  double confidence_threshold = 0.0;
  uint64_t seed = 0;  // prompt i samples with seed + i
};

// Pooled statistics of speculative generation over `prompts`.
engine::SpeculativeStats run_accept(model::Transformer& target, draft::Drafter& drafter,
                                    const tokenizer::Tokenizer& tok, const std::string& model_dir,
                                    const std::vector<std::string>& prompts, const AcceptOptions& options,
                                    const std::function<void(int64_t)>& on_prompt_done = {});

}  // namespace dspark::bench
