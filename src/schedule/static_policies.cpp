#include "schedule/static_policies.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace dspark::schedule {

namespace {

int64_t leading_at_least(const RequestDraft& request, double threshold) {
  const std::vector<double> a = survival(request);
  int64_t l = 0;
  while (l < static_cast<int64_t>(a.size()) && a[static_cast<size_t>(l)] >= threshold) ++l;
  return l;
}

}  // namespace

std::vector<int64_t> schedule_none(std::span<const RequestDraft> batch) {
  check_batch(batch);
  return std::vector<int64_t>(batch.size(), 0);
}

std::vector<int64_t> schedule_mtp1(std::span<const RequestDraft> batch) {
  check_batch(batch);
  std::vector<int64_t> lengths(batch.size());
  for (size_t r = 0; r < batch.size(); ++r) lengths[r] = std::min<int64_t>(1, n_verifiable(batch[r]));
  return lengths;
}

std::vector<int64_t> schedule_fixed(std::span<const RequestDraft> batch) {
  check_batch(batch);
  std::vector<int64_t> lengths(batch.size());
  for (size_t r = 0; r < batch.size(); ++r) lengths[r] = n_verifiable(batch[r]);
  return lengths;
}

std::vector<int64_t> schedule_threshold(std::span<const RequestDraft> batch, double threshold) {
  if (!(threshold >= 0.0 && threshold <= 1.0))
    throw Error("schedule threshold " + std::to_string(threshold) + " is not in [0, 1]");
  check_batch(batch);
  std::vector<int64_t> lengths(batch.size());
  for (size_t r = 0; r < batch.size(); ++r) lengths[r] = leading_at_least(batch[r], threshold);
  return lengths;
}

}  // namespace dspark::schedule
