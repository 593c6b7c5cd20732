#include "schedule/admission_path.h"

#include <algorithm>

#include "common/error.h"

namespace dspark::schedule {

namespace {

bool better(const Extension& x, const Extension& y) {
  if (x.survival != y.survival) return x.survival > y.survival;
  if (x.slot != y.slot) return x.slot < y.slot;
  return x.request < y.request;
}

void append_request(std::vector<Extension>& path, const RequestDraft& request, int64_t r) {
  const std::vector<double> a = survival(request);
  for (size_t j = 0; j < a.size() && a[j] > 0.0; ++j) path.push_back({r, static_cast<int64_t>(j + 1), a[j]});
}

}  // namespace

std::vector<Extension> admission_path(std::span<const RequestDraft> batch) {
  check_batch(batch);
  std::vector<Extension> path;
  for (size_t r = 0; r < batch.size(); ++r) append_request(path, batch[r], static_cast<int64_t>(r));
  std::sort(path.begin(), path.end(), better);
  return path;
}

std::vector<int64_t> lengths_after(std::span<const Extension> path, int64_t n_admitted, int64_t n_requests) {
  DSPARK_ASSERT(n_admitted >= 0 && n_admitted <= static_cast<int64_t>(path.size()));
  std::vector<int64_t> lengths(static_cast<size_t>(n_requests), 0);
  for (int64_t i = 0; i < n_admitted; ++i) {
    int64_t& l = lengths[static_cast<size_t>(path[i].request)];
    DSPARK_ASSERT(path[i].slot == l + 1);  // the path is prefix-ordered by construction
    l = path[i].slot;
  }
  return lengths;
}

}  // namespace dspark::schedule
