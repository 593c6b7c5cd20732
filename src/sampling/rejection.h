// Lossless verification of a drafted block: standard speculative rejection sampling.
//
// Pure functions of the distributions and the request's random stream, so the same code serves
// one request or a batch, and the tests can enumerate or sample them directly.
//
// For slot k = 0..n-1, with p_k the target's and q_k the drafter's distribution after the same
// sampling transform (temperature, top-k, top-p, min-p):
//   accept x_k with probability min(1, p_k(x_k) / q_k(x_k));
//   on the first rejection, emit a token drawn from norm(max(0, p_k - q_k)) and stop;
//   if all n are accepted, emit a bonus token drawn from p_n.
// The emitted sequence is then distributed exactly as n+1 autoregressive draws from the target,
// whatever q is, provided x_k was drawn from q_k (which may depend on x_0..x_{k-1}).
#pragma once
#include <cstdint>
#include <span>

#include "sampling/rng.h"

namespace dspark::sampling {

struct VerifyOutcome {
  int64_t n_accepted = 0;  // drafted tokens accepted (0..n)
  int64_t next_token = 0;  // the token emitted after them: the residual draw or the bonus
};

// target_probs: [(n + 1) * vocab] row-major p_0..p_n; draft_probs: [n * vocab] q_0..q_{n-1};
// draft_tokens: [n]. Draws uniforms from rng: one per examined slot, one for the final token.
VerifyOutcome verify_sampled(std::span<const float> target_probs, std::span<const float> draft_probs,
                             std::span<const int64_t> draft_tokens, int64_t vocab, Rng& rng);

// Greedy: accept while the drafted token equals the target's argmax; the next token is the
// target's argmax at the first mismatch (or after the last slot). target_argmax: [n + 1].
VerifyOutcome verify_greedy(std::span<const int64_t> target_argmax, std::span<const int64_t> draft_tokens);

}  // namespace dspark::sampling
