#include "schedule/request_draft.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace dspark::schedule {

int64_t n_verifiable(const RequestDraft& request) {
  return std::min<int64_t>(request.cap, static_cast<int64_t>(request.confidences.size()));
}

std::vector<double> survival(const RequestDraft& request) {
  std::vector<double> a(static_cast<size_t>(n_verifiable(request)));
  double prefix = 1.0;
  for (size_t j = 0; j < a.size(); ++j) a[j] = prefix *= request.confidences[j];
  return a;
}

void check_batch(std::span<const RequestDraft> batch) {
  for (size_t r = 0; r < batch.size(); ++r) {
    if (batch[r].cap < 0)
      throw Error("schedule: request " + std::to_string(r) + " has cap " + std::to_string(batch[r].cap) +
                  ", expected >= 0");
    const auto& c = batch[r].confidences;
    for (size_t k = 0; k < c.size(); ++k)
      if (!(c[k] >= 0.0 && c[k] <= 1.0))  // also rejects NaN
        throw Error("schedule: request " + std::to_string(r) + " slot " + std::to_string(k + 1) + " has confidence " +
                    std::to_string(c[k]) + ", expected a probability in [0, 1]");
  }
}

}  // namespace dspark::schedule
