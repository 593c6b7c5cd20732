// The load-blind policies: they ignore the SPS table, so they are the baselines the hardware-aware
// schedulers are compared against. All return [n_requests] lengths, each <= n_verifiable, and
// validate the batch (check_batch).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "schedule/request_draft.h"

namespace dspark::schedule {

// `none`: no speculation, every l_r = 0.
std::vector<int64_t> schedule_none(std::span<const RequestDraft> batch);
// `mtp1`: one draft per request where the request has one and its cap allows it.
std::vector<int64_t> schedule_mtp1(std::span<const RequestDraft> batch);
// `fixed`: every draft, up to the cap.
std::vector<int64_t> schedule_fixed(std::span<const RequestDraft> batch);
// `threshold`: the leading slots whose cumulative survival a_j = prod_{i<=j} c_i is >= threshold,
// i.e. stop before the first slot with a_j < threshold. On a_j, not c_j: a_j is the expected gain
// of the slot, the quantity dspark ranks by, so this is the same ranking cut at a fixed level
// instead of a load-dependent one. (The drafter's --confidence-threshold already cuts on c_j.)
// threshold in [0, 1], else dspark::Error; 0 verifies every draft, like `fixed`.
std::vector<int64_t> schedule_threshold(std::span<const RequestDraft> batch, double threshold);

}  // namespace dspark::schedule
