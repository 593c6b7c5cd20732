// The verification policy the engine consults every step: one object that owns all the schedule's
// state, so the engine holds none. Per step the engine asks, in order:
//   1. plan_step(): draft this step or not (dspark-async's gate may keep the drafter off, or draft
//      only to probe, verifying nothing);
//   2. choose_lengths(): after drafting, every request's verification length l_r (a pure policy of
//      schedule_lengths, fed the confidences and the SPS table for this batch);
//   3. observe(): after verification, what each request accepted.
// State: the confidences of the last two drafting steps (dspark-async's capacity comes from two steps
// back), the gate (probe interval, its verdict on the old batch, steps without drafting), the SPS
// tables per number of drafting requests, and, for drafters without a confidence head, the measured
// per-position acceptance that stands in for c_k.
//
// Lossless: every decision is a function of the past only (earlier steps' confidences and
// acceptances) plus, for choose_lengths, this step's confidences through the admission path, which
// never lets a draft's own value decide whether it is verified (schedule/admission_path.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "schedule/confidence_history.h"
#include "schedule/request_draft.h"
#include "schedule/schedule_kind.h"
#include "schedule/sps_table.h"

namespace dspark::schedule {

// The SPS table of a step in which n_requests requests draft (0: a step without drafting).
using SpsSource = std::function<SpsTable(int64_t n_requests)>;

// One request's proposal as the policy sees it.
struct ProposedBlock {
  int64_t n_drafted = 0;              // tokens proposed (0: the request did not draft)
  std::span<const float> confidence;  // [n_drafted] c_k (a view of the drafter's block, valid for the
                                      // call), or empty when the drafter has no confidence head
};

enum class Drafting {
  kOff,     // no drafting call this step
  kProbe,   // a sample of the batch drafts so the gate's history stays current; nothing is verified
  kVerify,  // every request drafts and the schedule admits what is verified
};

// What one step drafts: the decision, and per decoding request whether it drafts.
struct StepPlan {
  Drafting drafting = Drafting::kOff;
  std::vector<bool> drafts;  // [n_decoding]: all for kVerify, a rotating sample for kProbe, none for kOff
  int64_t n_drafting() const { return std::count(drafts.begin(), drafts.end(), true); }
};

class VerificationPolicy {
 public:
  // sps is required when needs_sps_table(kind); threshold is the `threshold` policy's cut.
  VerificationPolicy(ScheduleKind kind, double threshold, SpsSource sps);

  ScheduleKind kind() const { return kind_; }
  // Called once per step before drafting; n_decoding: requests past their prefill.
  StepPlan plan_step(int64_t n_decoding);
  // [n_decoding] l_r, each <= blocks[r].n_drafted; zeros unless plan.drafting == kVerify. The blocks
  // enter the history either way; a probe's sample enters it standing for the whole batch (its
  // blocks repeated in turn up to the batch's size), since the gate judges the whole batch.
  std::vector<int64_t> choose_lengths(const std::vector<ProposedBlock>& blocks, const StepPlan& plan);
  // After verification: `verified` drafts of one request, `accepted` of them accepted;
  // has_confidence: whether its block carried confidences (otherwise the measured per-position
  // acceptance is updated).
  void observe(int64_t verified, int64_t accepted, bool has_confidence);

  // The SPS table for steps in which n_requests requests draft, built once per n_requests.
  const SpsTable& sps_table(int64_t n_requests);
  // The SPS source's costs changed (the engine rescaled its profile to the machine's minute):
  // tables are built anew when next asked for, and the gate judges its old batch by them.
  void rebuild_sps_tables();

  // What the last choose_lengths(kVerify) planned, for the server's metrics: the capacity K
  // dspark-async took from two steps back (-1 for other schedules or without history), and the
  // table's SPS(B) for the step's B = sum_r (1 + l_r) (0 without a table or beyond its range).
  struct StepEstimate {
    int64_t capacity = -1;
    double sps = 0;
  };
  const StepEstimate& last_estimate() const { return last_estimate_; }
  // A step in which n_requests requests decode without drafts (the gate kept the drafter off):
  // its estimate is SPS(n_requests) without drafting, and nothing verified (K = 0).
  void note_step_without_drafts(int64_t n_requests);

 private:
  std::vector<RequestDraft> scheduler_view(const std::vector<ProposedBlock>& blocks) const;
  Drafting gate();
  std::vector<bool> probe_sample(int64_t n_decoding);

  ScheduleKind kind_;
  double threshold_;
  SpsSource sps_;
  std::map<int64_t, SpsTable> sps_tables_;
  ConfidenceHistory history_;
  int64_t probe_interval_;                // dspark-async's gate: steps between probes (see the .cpp)
  std::optional<bool> old_batch_pays_;    // the gate's verdict on history_'s oldest batch
  int64_t steps_without_drafting_ = 0;
  int64_t next_probed_ = 0;               // where the next probe's sample starts (it rotates)
  StepEstimate last_estimate_;
  // Per position k: drafts verified and accepted there, for drafters without a confidence head
  // (Laplace smoothed into a non-anticipating stand-in for c_k).
  std::vector<double> pos_verified_, pos_accepted_;
};

}  // namespace dspark::schedule
