#include "schedule/objective.h"

#include "common/error.h"

namespace dspark::schedule {

int64_t verified_tokens(std::span<const int64_t> lengths) {
  int64_t b = 0;
  for (int64_t l : lengths) b += 1 + l;
  return b;
}

double expected_tokens(std::span<const RequestDraft> batch, std::span<const int64_t> lengths) {
  DSPARK_ASSERT(batch.size() == lengths.size());
  double tau = 0.0;
  for (size_t r = 0; r < batch.size(); ++r) {
    const std::vector<double> a = survival(batch[r]);
    DSPARK_ASSERT(lengths[r] >= 0 && lengths[r] <= static_cast<int64_t>(a.size()));
    tau += 1.0;
    for (int64_t j = 0; j < lengths[r]; ++j) tau += a[static_cast<size_t>(j)];
  }
  return tau;
}

double expected_throughput(std::span<const RequestDraft> batch, std::span<const int64_t> lengths,
                           const SpsTable& table) {
  return throughput(expected_tokens(batch, lengths), verified_tokens(lengths), table);
}

}  // namespace dspark::schedule
