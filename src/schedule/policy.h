// One entry point for the engine: the verification length of every request under a ScheduleKind.
// Everything here is a pure function of its arguments; no state, no randomness.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "schedule/request_draft.h"
#include "schedule/schedule_kind.h"
#include "schedule/sps_table.h"

namespace dspark::schedule {

// What a policy may read besides this step's batch.
struct ScheduleContext {
  const SpsTable* sps = nullptr;  // required when needs_sps_table(kind); not owned
  // dspark-async: the batch scheduled two steps earlier (ConfidenceHistory::two_steps_back());
  // nullopt before there is one, and then dspark-async runs Algorithm 1 instead.
  std::optional<std::span<const RequestDraft>> two_steps_back;
  double threshold = 0.5;  // `threshold`: verify the leading slots with a_j >= threshold, in [0, 1]
  int64_t* capacity = nullptr;  // out, optional: dspark-async's capacity K (schedule_async)
};

// [n_requests] l_r, each in 0..n_verifiable(batch[r]). Throws dspark::Error on a bad batch, a bad
// threshold, or a table-driven kind without a table.
std::vector<int64_t> schedule_lengths(ScheduleKind kind, std::span<const RequestDraft> batch,
                                      const ScheduleContext& context);

}  // namespace dspark::schedule
