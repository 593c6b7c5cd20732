#include "schedule/sync_scheduler.h"

#include "schedule/admission_path.h"

namespace dspark::schedule {

namespace {

// How many path extensions Algorithm 1 admits before Theta stops increasing.
int64_t admitted_with_early_stop(std::span<const Extension> path, int64_t n_requests, const SpsTable& table) {
  double tau = static_cast<double>(n_requests);
  int64_t b = n_requests;
  double best = throughput(tau, b, table);
  int64_t n = 0;
  for (const Extension& e : path) {
    if (b + 1 > table.max_tokens()) break;
    const double theta = throughput(tau + e.survival, b + 1, table);
    if (!(theta > best)) break;
    tau += e.survival;
    ++b;
    best = theta;
    ++n;
  }
  return n;
}

}  // namespace

std::vector<int64_t> schedule_sync(std::span<const RequestDraft> batch, const SpsTable& table) {
  const std::vector<Extension> path = admission_path(batch);
  const auto n_requests = static_cast<int64_t>(batch.size());
  if (n_requests == 0 || !table.covers(n_requests)) return std::vector<int64_t>(batch.size(), 0);
  return lengths_after(path, admitted_with_early_stop(path, n_requests, table), n_requests);
}

}  // namespace dspark::schedule
