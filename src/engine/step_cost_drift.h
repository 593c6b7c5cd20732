// The step-cost profile kept true to the machine's minute. A profile (engine/step_cost.h) is
// measured once, but on a shared machine a step's cost moves with other tenants' memory traffic
// and clock: an hour later the same step ran 17% faster than its profile said (docs/results.md,
// dspark-async at C = 1), and the schedulers planned with the stale figures. So the engine rescales
// the profile by what its own steps take: the median, over the last kWindow steps, of measured /
// profiled time, one factor for the drafting call and one for the rest of the step (the target
// forward, verification and commits), since the two parts drift apart (the drafter's working set
// is small and cache-resident; the target's streams from memory).
//
// A step's prediction uses only the steps before it. Scaling both parts by one factor would leave
// every plan as it was (SPS tables scaled alike); the factors matter when the parts drift apart,
// when draft(R) against verify(B) is what the dspark schedules weigh.
#pragma once
#include <cstdint>
#include <deque>

#include "engine/step_cost.h"
#include "schedule/sps_table.h"

namespace dspark::engine {

// One step's measured time against what the step-cost profile predicts for it: the cost model the
// dspark schedules plan with says a step of R drafting requests and B target tokens takes
// draft(R) + verify(B) (engine/step_cost.h), each part rescaled by the drift. Comparing the two,
// step by step, shows where the plan and the real step part ways.
struct StepTiming {
  int64_t drafting_requests = 0;  // R: requests in the drafting call (0: the step drafted nothing)
  int64_t verify_tokens = 0;      // anchors plus verified drafts
  int64_t prefill_tokens = 0;     // prompt tokens prefilled in the same forward
  int64_t requests = 0;           // requests in the forward (decoding and prefilling)
  double draft_seconds = 0;       // the gate and the drafting call
  double seconds = 0;             // the whole step, admission to release
  double predicted_seconds = 0;   // the rescaled profile's draft(R) + verify(verify + prefill tokens,
                                  // over the step's requests), from the steps before this one; 0
                                  // without a profile or past its range
  double profile_seconds = 0;     // the same from the profile as measured (no rescaling)
};

class StepCostDrift {
 public:
  static constexpr int64_t kWindow = 31;  // steps per factor's median (odd: a middle sample)

  explicit StepCostDrift(const StepCost& profile) : profile_(profile) {}

  double draft_scale() const { return draft_scale_; }
  double verify_scale() const { return verify_scale_; }
  // The step time the schedulers plan with: the profile's draft(R) and verify part, each times its
  // factor; 0 where the profile has no figure (a B past its range).
  double predict(int64_t n_drafting, int64_t n_tokens, int64_t n_requests) const {
    return profile_.step_seconds(n_drafting, n_tokens, n_requests, draft_scale_, verify_scale_);
  }
  // The SPS table for n_requests drafting requests (0: none), from the rescaled costs.
  schedule::SpsTable sps_for(int64_t n_requests) const {
    return profile_.sps_for(n_requests, draft_scale_, verify_scale_);
  }
  // Takes one finished step's times (a step with a prefill chunk is not what the profile measured
  // and is skipped; so is one past the profile's range). Returns whether a factor has moved more
  // than 2% since the last call that returned true, i.e. whether SPS tables built since are stale.
  bool observe(const StepTiming& step);

 private:
  const StepCost& profile_;
  std::deque<double> draft_ratios_, verify_ratios_;  // the last kWindow measured / profiled
  double draft_scale_ = 1, verify_scale_ = 1;
  double tabled_draft_scale_ = 1, tabled_verify_scale_ = 1;  // the factors the tables were built with
};

}  // namespace dspark::engine
