#include "engine/step_cost_drift.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dspark::engine {

namespace {

constexpr double kRebuildBeyond = 0.02;

// The window's median: a stall (the process descheduled for a step) moves it by one sample.
double push_and_median(std::deque<double>& window, double ratio) {
  window.push_back(ratio);
  if (static_cast<int64_t>(window.size()) > StepCostDrift::kWindow) window.pop_front();
  std::vector<double> sorted(window.begin(), window.end());
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  return *middle;
}

bool moved(double now, double then) { return std::abs(now / then - 1.0) > kRebuildBeyond; }

}  // namespace

bool StepCostDrift::observe(const StepTiming& step) {
  if (step.prefill_tokens > 0) return false;
  const double draft = profile_.draft_cost(step.drafting_requests);
  const double verify = profile_.rest_seconds(step.drafting_requests, step.verify_tokens, step.requests);
  if (verify <= 0) return false;
  if (draft > 0 && step.draft_seconds > 0) draft_scale_ = push_and_median(draft_ratios_, step.draft_seconds / draft);
  const double rest = step.seconds - step.draft_seconds;
  if (rest > 0) verify_scale_ = push_and_median(verify_ratios_, rest / verify);
  if (!moved(draft_scale_, tabled_draft_scale_) && !moved(verify_scale_, tabled_verify_scale_)) return false;
  tabled_draft_scale_ = draft_scale_;
  tabled_verify_scale_ = verify_scale_;
  return true;
}

}  // namespace dspark::engine
