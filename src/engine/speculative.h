// Speculative generation for one request: prefill (capturing the drafter's target features),
// then rounds of draft -> verify (one ragged target forward over anchor + drafts) -> accept
// (rejection sampling, sampling/rejection.h) -> commit (target KV truncated to the accepted
// prefix, drafter context extended with the committed positions).
//
// The output distribution is exactly the target's: the drafter changes speed, never tokens'
// probabilities. At greedy it is token for token the autoregressive output.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "draft/drafter.h"
#include "engine/autoregressive.h"
#include "model/transformer.h"
#include "sampling/rejection.h"

namespace dspark::engine {

// The sampled-mode verifier; a seam for the tests' deliberately broken control.
using SampledVerifier = std::function<sampling::VerifyOutcome(std::span<const float>, std::span<const float>,
                                                              std::span<const int64_t>, int64_t, sampling::Rng&)>;

struct SpeculativeOptions {
  int64_t gamma = 7;                  // drafts per round (at most the drafter's block size)
  double confidence_threshold = 0.0;  // DSpark: cut the proposal at the first c_k below this; 0 = off
  SampledVerifier verifier;           // empty: sampling::verify_sampled
};

// Round statistics, pooled over rounds (deepspec-spec 5.4).
struct SpeculativeStats {
  int64_t rounds = 0;
  int64_t committed = 0;                 // sum over rounds of tokens committed (a + 1; a on an accepted stop)
  int64_t proposed = 0;                  // sum over rounds of drafts proposed (g)
  std::vector<int64_t> proposed_at;      // [gamma] rounds with g > k
  std::vector<int64_t> accepted_at;      // [gamma] rounds with a > k
  std::vector<int64_t> accepted_per_round;  // a of each round, in order
  // Rounds of drafters with a confidence head: c_k of the proposed slots and how many were
  // accepted. What `dspark calibrate` fits on.
  struct ConfidenceRound {
    std::vector<float> confidence;
    int64_t accepted = 0;
  };
  std::vector<ConfidenceRound> confidence_rounds;
  double draft_seconds = 0, verify_seconds = 0;

  double acceptance_length() const;                 // tau: committed / rounds (bonus included)
  double drafts_per_round() const;                  // proposed / rounds
  std::vector<double> accept_rate() const;          // unconditional: accepted_at[k] / proposed_at[k]
  std::vector<double> conditional_accept_rate() const;  // P(slot k accepted | slots < k accepted)
  void merge(const SpeculativeStats& other);
};

struct SpeculativeResult {
  GenerationResult generation;
  SpeculativeStats stats;
};

// One token from a row of target logits [vocab], as the autoregressive path draws it.
int64_t draw_token(const torch::Tensor& logits_row, const sampling::SamplingParams& params, sampling::Rng& rng);

// Verifies drafts [n] against the target's logits [n + 1, vocab] (rows anchor..last draft):
// greedy matching at T = 0, else rejection sampling with q = the first n rows of draft_probs
// [>= n, vocab] through `verifier` (empty: sampling::verify_sampled).
sampling::VerifyOutcome verify_drafts(const torch::Tensor& target_logits, const std::vector<int64_t>& drafts,
                                      const torch::Tensor& draft_probs, const sampling::SamplingParams& params,
                                      sampling::Rng& rng, const SampledVerifier& verifier);

// on_token is called with (0, token) as tokens are committed, stop tokens excluded.
SpeculativeResult generate_speculative(model::Transformer& target, draft::Drafter& drafter,
                                       const GenerationRequest& request, const SpeculativeOptions& options,
                                       const TokenCallback& on_token = {});

}  // namespace dspark::engine
