#include "model/kernels/column_runs.h"

#include "common/error.h"

namespace dspark::kernels {

ColumnRuns::ColumnRuns(int64_t n, int64_t chunk_columns, int threads)
    : n_(n), chunk_columns_(chunk_columns), threads_(threads), runs_(std::make_unique<Run[]>(threads)) {
  DSPARK_ASSERT(n >= 0 && chunk_columns > 0 && threads > 0);
  const int64_t chunks = (n + chunk_columns - 1) / chunk_columns;
  for (int t = 0; t < threads; ++t) {
    runs_[t].first = chunks * t / threads;
    runs_[t].count = chunks * (t + 1) / threads - runs_[t].first;
  }
}

void ColumnRuns::chunk_columns(int64_t chunk, int64_t* begin, int64_t* end) const {
  *begin = chunk * chunk_columns_;
  *end = *begin + chunk_columns_ < n_ ? *begin + chunk_columns_ : n_;
}

bool ColumnRuns::claim(Run& run) {
  return run.claimed.load(std::memory_order_relaxed) < run.count &&
         run.claimed.fetch_add(1, std::memory_order_relaxed) < run.count;
}

bool ColumnRuns::next(int self, int64_t* begin, int64_t* end) {
  DSPARK_ASSERT(self >= 0 && self < threads_);
  Run& own = runs_[self];
  if (claim(own)) {
    chunk_columns(own.first + own.taken_front++, begin, end);
    return true;
  }
  for (int i = 1; i < threads_; ++i) {
    Run& other = runs_[(self + i) % threads_];
    if (claim(other)) {
      chunk_columns(other.first + other.count - 1 - other.stolen.fetch_add(1, std::memory_order_relaxed), begin, end);
      return true;
    }
  }
  return false;
}

}  // namespace dspark::kernels
