#include "schedule/async_scheduler.h"

#include <algorithm>

#include "common/error.h"
#include "schedule/admission_path.h"
#include "schedule/objective.h"
#include "schedule/sync_scheduler.h"

namespace dspark::schedule {

namespace {

// Draft tokens the table still has room for beside n_requests anchors (0 if none).
int64_t room_in_table(int64_t n_requests, const SpsTable& table) {
  return std::max<int64_t>(0, table.max_tokens() - n_requests);
}

// argmax over K of Theta(K) along the path, no early stop; smallest K on ties.
int64_t best_capacity(std::span<const Extension> path, int64_t n_requests, const SpsTable& table) {
  const int64_t k_max = std::min<int64_t>(static_cast<int64_t>(path.size()), room_in_table(n_requests, table));
  double tau = static_cast<double>(n_requests);
  double best = throughput(tau, n_requests, table);
  int64_t best_k = 0;
  for (int64_t k = 1; k <= k_max; ++k) {
    tau += path[static_cast<size_t>(k - 1)].survival;
    const double theta = throughput(tau, n_requests + k, table);
    if (theta > best) {
      best = theta;
      best_k = k;
    }
  }
  return best_k;
}

}  // namespace

int64_t capacity_global_search(std::span<const RequestDraft> batch, const SpsTable& table) {
  const std::vector<Extension> path = admission_path(batch);
  const auto n_requests = static_cast<int64_t>(batch.size());
  if (n_requests == 0 || !table.covers(n_requests)) return 0;
  return best_capacity(path, n_requests, table);
}

std::vector<int64_t> admit_top_k(std::span<const RequestDraft> batch, int64_t capacity) {
  DSPARK_ASSERT(capacity >= 0);
  const std::vector<Extension> path = admission_path(batch);
  const int64_t n = std::min<int64_t>(capacity, static_cast<int64_t>(path.size()));
  return lengths_after(path, n, static_cast<int64_t>(batch.size()));
}

std::vector<int64_t> schedule_async(std::span<const RequestDraft> batch,
                                    std::optional<std::span<const RequestDraft>> two_steps_back,
                                    const SpsTable& table, int64_t* capacity) {
  if (!two_steps_back) return schedule_sync(batch, table);
  const int64_t k = capacity_global_search(*two_steps_back, table);
  if (capacity) *capacity = k;
  return admit_top_k(batch, std::min(k, room_in_table(static_cast<int64_t>(batch.size()), table)));
}

bool drafting_pays(std::span<const RequestDraft> old_batch, const SpsTable& with_drafting,
                   const SpsTable& without_drafting) {
  std::vector<RequestDraft> informative;
  for (const RequestDraft& r : old_batch)
    if (n_verifiable(r) > 0) informative.push_back(r);
  const auto n_requests = static_cast<int64_t>(informative.size());
  if (n_requests == 0 || !with_drafting.covers(n_requests) || !without_drafting.covers(n_requests)) return true;
  const std::vector<int64_t> lengths = admit_top_k(informative, capacity_global_search(informative, with_drafting));
  const double plain = static_cast<double>(n_requests) * without_drafting.sps(n_requests);
  return expected_throughput(informative, lengths, with_drafting) > plain;
}

std::vector<int64_t> schedule_retrospective(std::span<const RequestDraft> batch, const SpsTable& table) {
  return admit_top_k(batch, capacity_global_search(batch, table));
}

}  // namespace dspark::schedule
