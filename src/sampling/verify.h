// The per-request accept/resample step of speculative decoding, on the target's logits: what the
// engine calls once per request per step. Pure functions of their arguments and the request's
// random stream; the arithmetic of acceptance is rejection.h's.
//
// At T = 0 both reduce to argmax matching (the draft is accepted while it equals the target's
// argmax), so speculative output equals autoregressive output token for token.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <torch/torch.h>

#include "sampling/rejection.h"
#include "sampling/rng.h"
#include "sampling/sampling.h"

namespace dspark::sampling {

// The sampled-mode verifier (verify_sampled's signature); a seam for the tests' deliberately broken
// control, which must be caught by the losslessness tests.
using SampledVerifier = std::function<VerifyOutcome(std::span<const float>, std::span<const float>,
                                                    std::span<const int64_t>, int64_t, Rng&)>;

// One token from a row of target logits [vocab]: argmax at T = 0, else a draw from the sampling
// transform of the row (one uniform from rng).
int64_t draw_token(const torch::Tensor& logits_row, const SamplingParams& params, Rng& rng);

// Verifies drafts [n] against the target's logits [n + 1, vocab] (rows anchor..last draft):
// greedy matching at T = 0, else rejection sampling with q = the first n rows of draft_probs
// [>= n, vocab] through `verifier` (empty: verify_sampled).
VerifyOutcome verify_drafts(const torch::Tensor& target_logits, std::span<const int64_t> drafts,
                            const torch::Tensor& draft_probs, const SamplingParams& params, Rng& rng,
                            const SampledVerifier& verifier = {});

// The probability that each drafted slot k < n is accepted given that the slots before it were,
// before its token is drawn: c*_k = sum_x min(p_k(x), q_k(x)) = 1 - TV(p_k, q_k), the quantity a
// DSpark confidence head is trained to predict (DSpark eq. 8), under the transform verify_drafts
// applies. At T = 0 the draft is deterministic, so c*_k is 1 where it equals the target's argmax,
// else 0. Arguments as verify_drafts'; returns [n]. Diagnostics only (calibration's ceiling).
std::vector<float> acceptance_probabilities(const torch::Tensor& target_logits, std::span<const int64_t> drafts,
                                            const torch::Tensor& draft_probs, const SamplingParams& params);

}  // namespace dspark::sampling
