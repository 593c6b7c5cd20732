// The scheduler's objective for a whole batch (DSpark paper 3.2.2):
//   B     = sum_r (1 + l_r)                     tokens sent to the target
//   tau   = sum_r (1 + sum_{j<=l_r} a_{r,j})    expected accepted tokens, bonus included
//   Theta = tau * SPS(B)                        expected tokens per second
// Used by tests and metrics; the policies accumulate the same sums incrementally.
#pragma once
#include <cstdint>
#include <span>

#include "schedule/request_draft.h"
#include "schedule/sps_table.h"

namespace dspark::schedule {

// lengths: [n_requests]. B.
int64_t verified_tokens(std::span<const int64_t> lengths);
// batch, lengths: [n_requests], each l_r <= n_verifiable. tau.
double expected_tokens(std::span<const RequestDraft> batch, std::span<const int64_t> lengths);
// Theta; throws dspark::Error if B is outside the table.
double expected_throughput(std::span<const RequestDraft> batch, std::span<const int64_t> lengths,
                           const SpsTable& table);

}  // namespace dspark::schedule
