#include "schedule/schedule_kind.h"

#include <array>
#include <utility>

#include "common/error.h"

namespace dspark::schedule {

namespace {

constexpr std::array<std::pair<ScheduleKind, const char*>, 6> kCliKinds{{
    {ScheduleKind::kNone, "none"},
    {ScheduleKind::kMtp1, "mtp1"},
    {ScheduleKind::kFixed, "fixed"},
    {ScheduleKind::kThreshold, "threshold"},
    {ScheduleKind::kDsparkSync, "dspark-sync"},
    {ScheduleKind::kDsparkAsync, "dspark-async"},
}};

}  // namespace

std::string schedule_kind_name(ScheduleKind kind) {
  for (const auto& [k, name] : kCliKinds)
    if (k == kind) return name;
  DSPARK_ASSERT(kind == ScheduleKind::kRetrospective);
  return "retrospective";
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (const auto& [kind, n] : kCliKinds)
    if (name == n) return kind;
  if (name == "retrospective")
    throw Error("schedule 'retrospective' is test-only (it is not lossless); expected one of " + cli_schedule_names());
  throw Error("unknown schedule '" + name + "' (expected one of " + cli_schedule_names() + ")");
}

std::string cli_schedule_names() {
  std::string names;
  for (const auto& [kind, name] : kCliKinds) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

bool needs_sps_table(ScheduleKind kind) {
  return kind == ScheduleKind::kDsparkSync || kind == ScheduleKind::kDsparkAsync ||
         kind == ScheduleKind::kRetrospective;
}

}  // namespace dspark::schedule
