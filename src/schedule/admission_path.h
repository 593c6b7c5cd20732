// The greedy admission path shared by the confidence-driven policies (DSpark paper 3.2.2).
//
// Extending request r from j-1 to j verified slots adds exactly a_{r,j} expected accepted tokens, and
// a_{r,j} <= a_{r,j-1}. So the candidate extensions, sorted globally by a descending, form a path on
// which every prefix is a set of per-request prefixes: the best K extensions for any K. Algorithm 1
// walks it with early stop; the async capacity search scans all of it; top-K admission cuts it at K.
//
// Order (deterministic, documented because ties are common, e.g. c = 1 or identical requests):
//   survival descending, then slot ascending, then request index ascending.
// Slot ascending on ties is what keeps j after j-1 when a_{r,j} == a_{r,j-1}; it also spreads equal
// values across requests before going deeper. None of the keys depends on a drafted token's value
// except through the survival itself, so cutting the path at a K fixed in advance stays causal.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "schedule/request_draft.h"

namespace dspark::schedule {

// Admitting this makes l_request = slot, adding `survival` expected tokens.
struct Extension {
  int64_t request = 0;    // index into the batch
  int64_t slot = 0;       // 1-based draft slot j
  double survival = 0.0;  // a_{request, slot} > 0
};

// Every extension with a_{r,j} > 0 and j <= n_verifiable(r), best first (the order above). A slot of
// survival 0 cannot be accepted, so it is never a candidate (Algorithm 1's set E). Validates the batch.
std::vector<Extension> admission_path(std::span<const RequestDraft> batch);

// [n_requests] verification lengths after admitting path[0..n_admitted).
std::vector<int64_t> lengths_after(std::span<const Extension> path, int64_t n_admitted, int64_t n_requests);

}  // namespace dspark::schedule
