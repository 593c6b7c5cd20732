#include "schedule/policy.h"

#include "common/error.h"
#include "schedule/async_scheduler.h"
#include "schedule/static_policies.h"
#include "schedule/sync_scheduler.h"

namespace dspark::schedule {

namespace {

const SpsTable& table_for(ScheduleKind kind, const ScheduleContext& context) {
  if (context.sps == nullptr) throw Error("schedule '" + schedule_kind_name(kind) + "' needs an SPS table");
  return *context.sps;
}

}  // namespace

std::vector<int64_t> schedule_lengths(ScheduleKind kind, std::span<const RequestDraft> batch,
                                      const ScheduleContext& context) {
  switch (kind) {
    case ScheduleKind::kNone: return schedule_none(batch);
    case ScheduleKind::kMtp1: return schedule_mtp1(batch);
    case ScheduleKind::kFixed: return schedule_fixed(batch);
    case ScheduleKind::kThreshold: return schedule_threshold(batch, context.threshold);
    case ScheduleKind::kDsparkSync: return schedule_sync(batch, table_for(kind, context));
    case ScheduleKind::kDsparkAsync:
      return schedule_async(batch, context.two_steps_back, table_for(kind, context), context.capacity);
    case ScheduleKind::kRetrospective: return schedule_retrospective(batch, table_for(kind, context));
  }
  DSPARK_ASSERT(false);
  return {};
}

}  // namespace dspark::schedule
