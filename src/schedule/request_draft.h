// One request's draft block as the scheduler sees it: the drafter's per-slot confidences and a cap.
// The survival probabilities a_j derived from them are what every confidence-driven policy ranks.
#pragma once
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace dspark::schedule {

inline constexpr int64_t kNoCap = std::numeric_limits<int64_t>::max();

struct RequestDraft {
  // [n_drafted] c_k = P(slot k accepted | slots 1..k-1 accepted), each in [0, 1]. May be shorter
  // than gamma (the drafter stopped early) or empty (nothing drafted).
  std::vector<double> confidences;
  // Most slots this request may verify (KV room, tokens left to its limit); 0 = speculation off.
  int64_t cap = kNoCap;
};

// min(cap, n_drafted): the longest verification this request allows.
int64_t n_verifiable(const RequestDraft& request);

// [n_verifiable] a_j = prod_{i<=j} c_i at index j-1. Non-increasing, since every c_i <= 1 (and a
// floating-point product by a factor <= 1 never grows).
std::vector<double> survival(const RequestDraft& request);

// Throws dspark::Error naming the request and slot on a confidence that is NaN or outside [0, 1],
// or on a negative cap. Every policy calls it first.
void check_batch(std::span<const RequestDraft> batch);

}  // namespace dspark::schedule
