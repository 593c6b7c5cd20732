// `dspark bench accept`: DeepSpec's acceptance protocol (deepspec-spec 5): batch 1, fixed seeds,
// the first user turn of each prompt rendered with the chat template (non-thinking, no system
// prompt), speculative generation verifying every draft (the `fixed` schedule) at a given
// temperature and gamma, statistics pooled over all steps of a prompt file. Runs through the engine.
// One drafter and one prompt file per call; accept_report.h makes the table and plots.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "calibrate/sts.h"
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

// The drafting steps that carry confidences, as STS's rounds: each c_k as its logit, with how many
// drafts were accepted and the exact acceptance probabilities of the verified slots. Steps without
// confidences (no confidence head, or a request's last step, which drafts nothing) are left out.
std::vector<calibrate::Round> calibration_rounds(std::span<const engine::DraftRound> steps);

// DeepSpec's confidence-head evaluation (deepspec-spec 5.5) of one prompt file's rounds: per slot,
// the 20-bin ECE and 1000-bin ROC-AUC of the cumulative survival prod_{j<=k} c_j, the confidences
// as the drafter reports them (its sts.json applied), against the realised prefix acceptance, then
// weighted over slots by their rounds (DeepSpec's ece_mean / auc_mean). auc_exact is the same AUC
// for the exact prefix-acceptance probabilities prod_{j<=k} (1 - TV): the ceiling of any head on
// these rounds. ece_floor is calibrate::ece_floor of the same predictions (200 redraws, seed 0):
// the ECE a perfectly calibrated head would read on this many rounds, the floor of ece. Meaningful
// only when every draft is verified (no confidence threshold).
struct ConfidenceMetrics {
  int64_t rounds = 0;
  double ece = 0.0, ece_floor = 0.0, auc = 0.0, auc_exact = 0.0;
};
// nullopt when no step carries confidences. gamma: the slots per round.
std::optional<ConfidenceMetrics> confidence_metrics(std::span<const engine::DraftRound> steps, int64_t gamma);

}  // namespace dspark::bench
