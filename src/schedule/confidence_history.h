// The confidences of the last two scheduled steps: dspark-async takes its capacity from the older.
// A value holder, no policy. Per step t:
//   lengths = schedule_async(batch_t, history.two_steps_back(), table);  // uses batch_{t-2}
//   history.push(std::move(batch_t));
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "schedule/request_draft.h"

namespace dspark::schedule {

class ConfidenceHistory {
 public:
  // Records the batch just scheduled; the one pushed two calls ago is forgotten.
  void push(std::vector<RequestDraft> batch) {
    older_ = std::move(newer_);
    newer_ = std::move(batch);
    n_pushed_ = n_pushed_ < 2 ? n_pushed_ + 1 : 2;
  }
  // The batch pushed two calls ago; nullopt until two batches have been pushed. Valid until the
  // next push or clear.
  std::optional<std::span<const RequestDraft>> two_steps_back() const {
    if (n_pushed_ < 2) return std::nullopt;
    return std::span<const RequestDraft>(older_);
  }
  void clear() { *this = ConfidenceHistory(); }

 private:
  std::vector<RequestDraft> older_;  // step t-2 when scheduling step t
  std::vector<RequestDraft> newer_;  // step t-1
  int n_pushed_ = 0;                 // 0, 1 or 2 (saturates)
};

}  // namespace dspark::schedule
