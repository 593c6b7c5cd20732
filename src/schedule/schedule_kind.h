// The verification-length policies, as chosen by `--schedule`.
#pragma once
#include <string>

namespace dspark::schedule {

enum class ScheduleKind {
  kNone,           // "none": no speculation
  kMtp1,           // "mtp1": one draft per request
  kFixed,          // "fixed": every draft
  kThreshold,      // "threshold": static cut on the cumulative survival
  kDsparkSync,     // "dspark-sync": Algorithm 1 with early stop
  kDsparkAsync,    // "dspark-async": capacity from two steps back, top-K admission
  kRetrospective,  // TEST ONLY, not lossless; parse_schedule_kind refuses it
};

// "none" | "mtp1" | "fixed" | "threshold" | "dspark-sync" | "dspark-async" | "retrospective".
std::string schedule_kind_name(ScheduleKind kind);
// The CLI names; throws dspark::Error listing them on anything else, "retrospective" included.
ScheduleKind parse_schedule_kind(const std::string& name);
// "none, mtp1, fixed, threshold, dspark-sync, dspark-async", for help texts.
std::string cli_schedule_names();
// Whether the policy reads the SPS table (so the engine must profile or load one).
bool needs_sps_table(ScheduleKind kind);

}  // namespace dspark::schedule
