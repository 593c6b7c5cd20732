#include "schedule/verification_policy.h"

#include <algorithm>

#include "common/error.h"
#include "schedule/async_scheduler.h"
#include "schedule/policy.h"

namespace dspark::schedule {

namespace {

// While dspark-async's gate keeps the drafter off it still drafts now and then (a probe), so the
// confidences it judges by stay current. A probe verifies nothing: its blocks only enter the
// history, so it costs one drafting call, not a verify step widened by drafts the gate has just
// judged not worth it. The interval starts at 8 steps and doubles after every probe that does not
// turn the gate on, up to 256, so where drafting never pays the probes cost little; it resets when
// drafting pays again. Only past decisions set it: nothing depends on a draft.
constexpr int64_t kFirstProbeInterval = 8, kMaxProbeInterval = 256;

// A probe drafts at most this many requests, in turn through the batch, and its blocks stand for
// the whole batch in the gate's history. Drafting costs about linearly in the requests that draft,
// so a whole-batch probe at C = 64 cost as much as three plain decode steps (docs/results.md);
// a sample of 4 costs a sixteenth of that and still judges from 28 confidences (gamma 7). Which
// requests are sampled follows a counter, never a draft, so the gate stays lossless.
constexpr int64_t kProbeRequests = 4;

}  // namespace

VerificationPolicy::VerificationPolicy(ScheduleKind kind, double threshold, SpsSource sps)
    : kind_(kind), threshold_(threshold), sps_(std::move(sps)), probe_interval_(kFirstProbeInterval) {
  if (needs_sps_table(kind_) && !sps_) throw Error("schedule " + schedule_kind_name(kind_) + " needs a step-cost profile");
}

const SpsTable& VerificationPolicy::sps_table(int64_t n_requests) {
  auto it = sps_tables_.find(n_requests);
  if (it == sps_tables_.end()) it = sps_tables_.emplace(n_requests, sps_(n_requests)).first;
  return it->second;
}

void VerificationPolicy::rebuild_sps_tables() {
  sps_tables_.clear();
  old_batch_pays_.reset();
}

StepPlan VerificationPolicy::plan_step(int64_t n_decoding) {
  StepPlan plan;
  if (n_decoding == 0) {
    steps_without_drafting_ = 0;
    return plan;
  }
  plan.drafting = kind_ == ScheduleKind::kDsparkAsync ? gate() : Drafting::kVerify;
  steps_without_drafting_ = plan.drafting == Drafting::kOff ? steps_without_drafting_ + 1 : 0;
  switch (plan.drafting) {
    case Drafting::kOff: plan.drafts.assign(n_decoding, false); break;
    case Drafting::kProbe: plan.drafts = probe_sample(n_decoding); break;
    case Drafting::kVerify: plan.drafts.assign(n_decoding, true); break;
  }
  return plan;
}

// kProbeRequests consecutive requests (all of a smaller batch), starting where the last probe's
// sample ended, so over a long run every request is probed.
std::vector<bool> VerificationPolicy::probe_sample(int64_t n_decoding) {
  std::vector<bool> drafts(n_decoding, false);
  const int64_t n = std::min(n_decoding, kProbeRequests);
  for (int64_t k = 0; k < n; ++k) drafts[(next_probed_ + k) % n_decoding] = true;
  next_probed_ = (next_probed_ + n) % n_decoding;
  return drafts;
}

// dspark-async only: whether this step drafts at all, from the batch of two drafting steps ago.
// Until the history holds two batches there is nothing to judge by: those steps draft only to
// fill it (probes), so a fresh engine never pays for verifying drafts blind. The verdict on one
// old batch is kept until the next drafting step replaces it.
Drafting VerificationPolicy::gate() {
  const auto old = history_.two_steps_back();
  if (!old) return Drafting::kProbe;
  if (!old_batch_pays_) {
    const int64_t n = static_cast<int64_t>(old->size());
    old_batch_pays_ = drafting_pays(*old, sps_table(n), sps_table(0));
  }
  if (*old_batch_pays_) {
    probe_interval_ = kFirstProbeInterval;
    return Drafting::kVerify;
  }
  if (steps_without_drafting_ + 1 < probe_interval_) return Drafting::kOff;
  probe_interval_ = std::min(2 * probe_interval_, kMaxProbeInterval);
  return Drafting::kProbe;
}

std::vector<RequestDraft> VerificationPolicy::scheduler_view(const std::vector<ProposedBlock>& blocks) const {
  std::vector<RequestDraft> batch(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    const ProposedBlock& block = blocks[i];
    batch[i].cap = block.n_drafted;
    if (!block.confidence.empty()) {
      batch[i].confidences.assign(block.confidence.begin(), block.confidence.end());
    } else {
      for (int64_t k = 0; k < block.n_drafted; ++k) {
        const size_t pos = static_cast<size_t>(k);
        const double accepted = pos < pos_accepted_.size() ? pos_accepted_[pos] : 0.0;
        const double verified = pos < pos_verified_.size() ? pos_verified_[pos] : 0.0;
        batch[i].confidences.push_back((accepted + 1.0) / (verified + 2.0));
      }
    }
    for (double& c : batch[i].confidences) c = std::clamp(c, 0.0, 1.0);
  }
  return batch;
}

void VerificationPolicy::note_step_without_drafts(int64_t n_requests) {
  if (!needs_sps_table(kind_) || n_requests == 0) return;
  const SpsTable& table = sps_table(0);
  last_estimate_ = {.capacity = kind_ == ScheduleKind::kDsparkAsync ? 0 : -1,
                    .sps = table.covers(n_requests) ? table.sps(n_requests) : 0.0};
}

namespace {

// The probe's sampled blocks repeated in turn up to the batch's size: the whole batch as the sample
// estimates it, so that the gate and the capacity search see the batch size they decide for.
std::vector<RequestDraft> stand_for_batch(const std::vector<RequestDraft>& batch, const std::vector<bool>& sampled) {
  std::vector<RequestDraft> sample;
  for (size_t i = 0; i < batch.size(); ++i)
    if (sampled[i]) sample.push_back(batch[i]);
  if (sample.empty()) return {};
  std::vector<RequestDraft> whole(batch.size());
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = sample[i % sample.size()];
  return whole;
}

}  // namespace

std::vector<int64_t> VerificationPolicy::choose_lengths(const std::vector<ProposedBlock>& blocks, const StepPlan& plan) {
  DSPARK_ASSERT(plan.drafts.size() == blocks.size());
  std::vector<RequestDraft> batch = scheduler_view(blocks);
  std::vector<int64_t> lengths(blocks.size(), 0);
  if (plan.drafting == Drafting::kProbe) batch = stand_for_batch(batch, plan.drafts);
  if (plan.drafting == Drafting::kVerify) {
    ScheduleContext context;
    context.threshold = threshold_;
    context.two_steps_back = history_.two_steps_back();
    if (needs_sps_table(kind_)) context.sps = &sps_table(static_cast<int64_t>(blocks.size()));
    StepEstimate estimate;  // K stays -1 unless dspark-async reports the one it used
    context.capacity = &estimate.capacity;
    lengths = schedule_lengths(kind_, batch, context);
    if (context.sps) {
      int64_t tokens = 0;
      for (int64_t l : lengths) tokens += 1 + l;
      if (context.sps->covers(tokens)) estimate.sps = context.sps->sps(tokens);
    }
    last_estimate_ = estimate;
  }
  history_.push(std::move(batch));
  old_batch_pays_.reset();
  return lengths;
}

void VerificationPolicy::observe(int64_t verified, int64_t accepted, bool has_confidence) {
  if (verified == 0 || has_confidence) return;
  if (static_cast<int64_t>(pos_verified_.size()) < verified) {
    pos_verified_.resize(verified, 0.0);
    pos_accepted_.resize(verified, 0.0);
  }
  // Position k was reached when every position before it was accepted.
  for (int64_t k = 0; k < verified && k <= accepted; ++k) {
    pos_verified_[k] += 1;
    if (k < accepted) pos_accepted_[k] += 1;
  }
}

}  // namespace dspark::schedule
