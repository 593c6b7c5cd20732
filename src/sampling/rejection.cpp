#include "sampling/rejection.h"

#include <algorithm>
#include <vector>

#include "common/error.h"

namespace dspark::sampling {

namespace {

// Inverse-CDF draw over non-negative weights that need not sum to 1; one uniform. Tokens of weight
// zero are skipped, so they can never be returned, even when rounding leaves the target just above
// the accumulated sum.
int64_t draw_from_weights(const std::vector<double>& weights, Rng& rng) {  // weights [vocab]
  double total = 0.0;
  for (double w : weights) total += w;
  DSPARK_ASSERT(total > 0.0);  // a target row without mass: the caller's distribution is broken
  const double target = rng.uniform() * total;
  double cumulative = 0.0;
  int64_t last_nonzero = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] > 0.0)) continue;
    cumulative += weights[i];
    last_nonzero = static_cast<int64_t>(i);
    if (target < cumulative) return last_nonzero;
  }
  return last_nonzero;
}

std::vector<double> to_double(const float* row, int64_t vocab) {  // row [vocab]
  return std::vector<double>(row, row + vocab);
}

// The token emitted on rejecting slot k: a draw from norm(max(0, p - q)). When p <= q everywhere
// (p == q up to rounding, so rejection was itself a rounding artefact) the residual is empty and
// the draw falls back to p, which is what the target would have sampled anyway.
int64_t draw_residual(const float* p, const float* q, int64_t vocab, Rng& rng) {  // p, q [vocab]
  std::vector<double> residual(vocab);
  double mass = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    residual[i] = std::max(0.0, static_cast<double>(p[i]) - static_cast<double>(q[i]));
    mass += residual[i];
  }
  if (mass > 0.0) return draw_from_weights(residual, rng);
  return draw_from_weights(to_double(p, vocab), rng);
}

// Accept x with probability min(1, p(x) / q(x)), written u * q < p to avoid the division. A token
// the drafter gave zero probability cannot have been drawn from q, so it is rejected rather than
// trusted (u * 0 < p would accept it).
bool accept_draft(double p_x, double q_x, Rng& rng) {
  const double u = rng.uniform();
  return q_x > 0.0 && u * q_x < p_x;
}

}  // namespace

VerifyOutcome verify_sampled(std::span<const float> target_probs, std::span<const float> draft_probs,
                             std::span<const int64_t> draft_tokens, int64_t vocab, Rng& rng) {
  const int64_t n = static_cast<int64_t>(draft_tokens.size());
  DSPARK_ASSERT(vocab > 0);
  DSPARK_ASSERT(static_cast<int64_t>(target_probs.size()) == (n + 1) * vocab);
  DSPARK_ASSERT(static_cast<int64_t>(draft_probs.size()) == n * vocab);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t x = draft_tokens[k];
    DSPARK_ASSERT(x >= 0 && x < vocab);
    const float* p = target_probs.data() + k * vocab;
    const float* q = draft_probs.data() + k * vocab;
    if (!accept_draft(p[x], q[x], rng)) return {k, draw_residual(p, q, vocab, rng)};
  }
  return {n, draw_from_weights(to_double(target_probs.data() + n * vocab, vocab), rng)};
}

VerifyOutcome verify_greedy(std::span<const int64_t> target_argmax, std::span<const int64_t> draft_tokens) {
  const int64_t n = static_cast<int64_t>(draft_tokens.size());
  DSPARK_ASSERT(static_cast<int64_t>(target_argmax.size()) == n + 1);
  for (int64_t k = 0; k < n; ++k)
    if (draft_tokens[k] != target_argmax[k]) return {k, target_argmax[k]};
  return {n, target_argmax[n]};
}

}  // namespace dspark::sampling
