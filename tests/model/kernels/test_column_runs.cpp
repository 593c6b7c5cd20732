// ColumnRuns hands every chunk to exactly one thread: owners front to back through their own
// runs, idle threads from the backs of the others'.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/kernels/column_runs.h"

namespace dspark::kernels {
namespace {

using Chunk = std::pair<int64_t, int64_t>;  // [begin, end)

std::vector<Chunk> take_all(ColumnRuns& runs, int self) {
  std::vector<Chunk> got;
  int64_t begin = 0, end = 0;
  while (runs.next(self, &begin, &end)) got.emplace_back(begin, end);
  return got;
}

// 1000 columns in chunks of 48: 21 chunks, the last one 40 columns; 3 runs of 7.
TEST(ColumnRuns, OwnRunFrontToBackThenOthersFromTheBack) {
  ColumnRuns runs(1000, 48, 3);
  int64_t begin = 0, end = 0;
  ASSERT_TRUE(runs.next(1, &begin, &end));  // thread 1 takes its first chunk
  EXPECT_EQ(Chunk(begin, end), Chunk(7 * 48, 8 * 48));

  const std::vector<Chunk> got = take_all(runs, 0);  // thread 0 does everything else
  std::vector<Chunk> expected;
  for (int64_t c = 0; c < 7; ++c) expected.emplace_back(c * 48, c * 48 + 48);      // own run
  for (int64_t c = 13; c >= 8; --c) expected.emplace_back(c * 48, c * 48 + 48);    // run 1's back
  expected.emplace_back(20 * 48, 1000);                                           // run 2's back
  for (int64_t c = 19; c >= 14; --c) expected.emplace_back(c * 48, c * 48 + 48);
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(runs.next(1, &begin, &end));
  EXPECT_FALSE(runs.next(2, &begin, &end));
}

TEST(ColumnRuns, MoreThreadsThanChunksAndEmpty) {
  ColumnRuns runs(50, 48, 4);  // 2 chunks: runs of 0, 1, 0, 1 chunks; thread 0 visits 1, 2, 3
  const std::vector<Chunk> got = take_all(runs, 0);
  EXPECT_EQ(got, (std::vector<Chunk>{{0, 48}, {48, 50}}));
  ColumnRuns none(0, 48, 2);
  int64_t begin = 0, end = 0;
  EXPECT_FALSE(none.next(1, &begin, &end));
}

// Threads racing for 4 runs of 2000 chunks: every chunk exactly once. One thread starts late, so
// the others must take from its run.
TEST(ColumnRuns, ConcurrentClaimsCoverEveryChunkOnce) {
  constexpr int kThreads = 4;
  constexpr int64_t kChunks = 8000;
  ColumnRuns runs(kChunks, 1, kThreads);
  std::vector<std::vector<int64_t>> got(kThreads);
  int team = 0;
#pragma omp parallel num_threads(kThreads)
  {
    const int self = omp_get_thread_num();
#pragma omp single
    team = omp_get_num_threads();
    if (self == 3) {
      // Start only once the others hold more chunks than their own runs have: some came from run 3.
      while (true) {
        int64_t seen = 0;
#pragma omp critical
        for (int t = 0; t < 3; ++t) seen += static_cast<int64_t>(got[t].size());
        if (seen > 3 * kChunks / 4 || omp_get_num_threads() < kThreads) break;
      }
    }
    int64_t begin = 0, end = 0;
    while (runs.next(self, &begin, &end)) {
#pragma omp critical
      got[self].push_back(begin);
    }
  }
  std::vector<int64_t> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kChunks));
  for (int64_t c = 0; c < kChunks; ++c) ASSERT_EQ(all[c], c);
  if (team == kThreads) {
    EXPECT_LT(got[3].size(), static_cast<size_t>(kChunks / kThreads));  // robbed
  }
}

}  // namespace
}  // namespace dspark::kernels
