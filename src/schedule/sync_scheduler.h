// `dspark-sync`: Algorithm 1 of the DSpark paper (3.2.2), the hardware-aware prefix scheduler.
//
// Start from l_r = 0 (B = R, tau = R, Theta_best = R * SPS(R)); walk the admission path, admitting one
// extension at a time (B += 1, tau += a_{r,j}, Theta = tau * SPS(B), one O(1) lookup); stop as soon
// as Theta is not strictly greater than Theta_best.
//
// Lossless: the decision to admit slot j of a request is taken before any extension ranked after it
// is looked at, and a_{r,j+1} (which needs the drafted x_{r,j}) ranks after a_{r,j}. So whether x_{r,j}
// is verified never depends on x_{r,j} itself (Appendix A shows what happens without the stop).
// Globally optimal only when Theta is unimodal along the path, i.e. on a smoothly falling SPS curve;
// on a jagged one it stops at the first local maximum.
//
// Admission also stops at the edge of the table (B = max_tokens). A batch with R > max_tokens gets
// all zeros: not even its plain step was measured.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "schedule/request_draft.h"
#include "schedule/sps_table.h"

namespace dspark::schedule {

// [n_requests] lengths. Validates the batch.
std::vector<int64_t> schedule_sync(std::span<const RequestDraft> batch, const SpsTable& table);

}  // namespace dspark::schedule
