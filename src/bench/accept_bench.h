// `dspark bench accept`: DeepSpec's acceptance protocol (deepspec-spec 5): batch 1, fixed seeds,
// the first user turn of each prompt rendered with the chat template (non-thinking, no system
// prompt), speculative generation verifying every draft (the `fixed` schedule) at a given
// temperature and gamma, statistics pooled over all steps of a prompt file. Runs through the engine.
// One drafter and one prompt file per call; accept_report.h makes the table and plots.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "draft/drafter.h"
#include "engine/request.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace dspark::bench {

// The prompts of a DeepSpec-style JSONL file: the first string of each line's "turns" array.
// format "turns" (DeepSpec, shared/data/eval), "instruction" (Self-Instruct's user-oriented file:
// "instruction" plus the first instance's "input"), or "auto" (instruction when the first line has
// an "instruction" and no "turns").
std::vector<std::string> read_prompts(const std::string& file, const std::string& format, int64_t limit);

// Each prompt as the first user turn of a chat, rendered with model_dir's chat template
// (non-thinking, no system prompt, generation prompt added), as token ids.
std::vector<std::vector<int64_t>> chat_prompt_ids(const std::string& model_dir, const tokenizer::Tokenizer& tok,
                                                  const std::vector<std::string>& prompts);

struct AcceptOptions {
  double temperature = 1.0;
  int64_t gamma = 7;
  int64_t max_tokens = 256;
  double confidence_threshold = 0.0;
  uint64_t seed = 0;  // prompt i samples with seed + i
};

struct AcceptResult {
  engine::RequestStats stats;              // pooled over the prompts
  std::vector<engine::DraftRound> rounds;  // every drafting step, in order (calibration's data)
};

// Speculative generation over `prompts`, one at a time; on_prompt_done(n) after the n-th.
AcceptResult run_accept(model::Transformer& target, draft::Drafter& drafter, const tokenizer::Tokenizer& tok,
                        const std::string& model_dir, const std::vector<std::string>& prompts,
                        const AcceptOptions& options, const std::function<void(int64_t)>& on_prompt_done = {});

}  // namespace dspark::bench
