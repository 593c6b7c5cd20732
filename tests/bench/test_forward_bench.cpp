// The forward benchmark's bookkeeping on the shipped model: every point is timed once per round,
// rounds run over all points of a context in turn, each run is rolled back so the next sees the
// same context, prefills are timed per context, and batch points are skipped when their KV cache
// would not fit.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bench/forward_bench.h"
#include "bench/median.h"
#include "test_util.h"

namespace dspark::bench {
namespace {

namespace fs = std::filesystem;

model::Transformer load_default() {
  return model::Transformer::load((fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string());
}

// 2 contexts x (B = 1; B = 2 and 4 as one sequence and as a batch) = 10 points, 1 warm-up and
// 3 timed rounds each. The KV cache holds context + 4 positions per slot, so a run that was not
// rolled back would overflow it on the next round and throw.
TEST(ForwardBench, TimesEveryPointOncePerRound) {
  model::Transformer target = load_default();
  ForwardBenchOptions o;
  o.contexts = {8, 16};
  o.batch_sizes = {1, 2, 4};
  o.warmup = 1;
  o.runs = 3;
  o.decode_tokens = 4;
  o.prefill_runs = 2;  // two prefills into the same slot: the first must be rolled back
  std::vector<std::string> rounds;
  const ForwardBenchResult r = run_forward_bench(target, o, [&](const std::string& message) {
    if (message.find("round") != std::string::npos) rounds.push_back(message);
  });

  ASSERT_EQ(r.points.size(), 10u);
  const std::vector<std::pair<std::string, int64_t>> order = {
      {"one_seq", 1}, {"one_seq", 2}, {"batch", 2}, {"one_seq", 4}, {"batch", 4}};
  for (size_t i = 0; i < r.points.size(); ++i) {
    const ForwardPoint& p = r.points[i];
    SCOPED_TRACE("point " + std::to_string(i));
    EXPECT_EQ(p.context, i < 5 ? 8 : 16);
    EXPECT_EQ(p.shape, order[i % 5].first);
    EXPECT_EQ(p.n_new, order[i % 5].second);
    ASSERT_EQ(p.runs_ms.size(), 3u);
    EXPECT_EQ(p.median_ms, median(p.runs_ms));
    EXPECT_GT(p.median_ms, 0);
    EXPECT_DOUBLE_EQ(p.steps_per_s, 1000.0 / p.median_ms);
  }
  EXPECT_EQ(r.decode_step_ms, r.points[0].median_ms);
  EXPECT_TRUE(r.skipped.empty());
  ASSERT_EQ(rounds.size(), 8u);  // 2 contexts x 4 rounds
  EXPECT_EQ(rounds[0], "context 8: round 1/4 (warm-up)");
  EXPECT_EQ(rounds[7], "context 16: round 4/4");
  EXPECT_GT(r.decode_tokens_per_s, 0);
  ASSERT_EQ(r.prefills.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const PrefillPoint& p = r.prefills[i];
    EXPECT_EQ(p.context, i == 0 ? 8 : 16);
    ASSERT_EQ(p.runs_ms.size(), 2u);
    EXPECT_EQ(p.median_ms, median(p.runs_ms));
    EXPECT_DOUBLE_EQ(p.tokens_per_s, p.context / (p.median_ms * 1e-3));
  }
}

TEST(ForwardBench, SkipsBatchPointsWhoseCacheWouldNotFit) {
  model::Transformer target = load_default();
  ForwardBenchOptions o;
  o.contexts = {8};
  o.batch_sizes = {1, 2};
  o.warmup = 0;
  o.runs = 1;
  o.decode_tokens = 2;
  o.max_kv_gib = 0;
  const ForwardBenchResult r = run_forward_bench(target, o);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.points[1].shape, "one_seq");
  EXPECT_EQ(r.points[1].n_new, 2);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("context 8"), std::string::npos);
}

}  // namespace
}  // namespace dspark::bench
