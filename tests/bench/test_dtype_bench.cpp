// bench dtypes on the shipped tiny model: every dtype is loaded and holds what was asked (auto
// resolves to the checkpoint's own precision), every point is timed once per round, the baseline's
// speedup is 1 by construction, a load's resident growth covers its weights and cache, and
// --batch-sizes without 1 is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "bench/dtype_bench.h"
#include "common/error.h"
#include "expect_error.h"
#include "test_util.h"

namespace dspark::bench {
namespace {

namespace fs = std::filesystem;

const std::string kModel = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();

TEST(DtypeBench, TimesEveryDtypeSideBySide) {
  DtypeBenchOptions o;
  o.dtypes = {model::WeightDType::kAuto, model::WeightDType::kQ8_0, model::WeightDType::kQ4_0};
  o.context = 16;
  o.batch_sizes = {1, 4};
  o.warmup = 1;
  o.runs = 3;
  int rounds = 0;
  const DtypeBenchResult r = run_dtype_bench(kModel, o, [&](const std::string& message) {
    if (message.find("round") != std::string::npos) ++rounds;
  });
  EXPECT_EQ(rounds, 4);
  ASSERT_EQ(r.dtypes.size(), 3u);
  EXPECT_EQ(r.dtypes[0].dtype, "auto");
  EXPECT_EQ(r.dtypes[0].held, "bf16");  // the shipped checkpoint is bf16
  EXPECT_EQ(r.dtypes[1].held, "q8_0");
  EXPECT_EQ(r.dtypes[2].held, "q4_0");
  // Q8_0 holds 34 bytes per 32 weights and Q4_0 18, against bf16's 64 (norms stay f32).
  EXPECT_NEAR(double(r.dtypes[1].weight_bytes) / r.dtypes[0].weight_bytes, 34.0 / 64, 0.01);
  EXPECT_NEAR(double(r.dtypes[2].weight_bytes) / r.dtypes[0].weight_bytes, 18.0 / 64, 0.01);
  for (const DtypeResult& d : r.dtypes) {
    SCOPED_TRACE(d.dtype);
    ASSERT_EQ(d.points.size(), 2u);
    for (const ForwardPoint& p : d.points) {
      EXPECT_EQ(p.runs_ms.size(), 3u);
      EXPECT_GT(p.median_ms, 0);
    }
    EXPECT_GT(d.kv_cache_bytes, 0);
  }
  EXPECT_EQ(r.decode_speedup.size(), 3u);
  EXPECT_EQ(r.decode_speedup[0], 1.0);
  // The first load cannot reuse an earlier one's freed memory: it grows by its weights and cache.
  EXPECT_GE(r.dtypes[0].resident_growth, 0.9 * double(r.dtypes[0].weight_bytes + r.dtypes[0].kv_cache_bytes));
}

// On a Q8_0 GGUF file, q4_0 (the file's blocks are not quantized again) is skipped and said so;
// the other dtypes are measured (the refusal once ended the run with no table). A run where no
// dtype loads is the refusal's error.
TEST(DtypeBench, SkipsADtypeTheFileRefuses) {
  const std::string gguf = test::fixture("gguf-tiny/untied-q8_0.gguf").string();
  DtypeBenchOptions o;
  o.dtypes = {model::WeightDType::kAuto, model::WeightDType::kQ4_0};
  o.context = 16;
  o.batch_sizes = {1};
  o.warmup = 0;
  o.runs = 1;
  std::string skipped;
  const DtypeBenchResult r = run_dtype_bench(gguf, o, [&](const std::string& message) {
    if (message.rfind("skipping", 0) == 0) skipped += message;
  });
  ASSERT_EQ(r.dtypes.size(), 1u);
  EXPECT_EQ(r.dtypes[0].held, "q8_0");
  ASSERT_EQ(r.skipped.size(), 1u);  // recorded for the table and the JSON, with its reason
  EXPECT_EQ(r.skipped[0].first, "q4_0, KV cache f32");
  EXPECT_NE(skipped.find("q4_0"), std::string::npos) << skipped;
  EXPECT_NE(skipped.find("mostly Q8_0"), std::string::npos) << skipped;
  o.dtypes = {model::WeightDType::kQ4_0};
  test::expect_error([&] { run_dtype_bench(gguf, o); }, {"no dtype loaded", "q4_0", "mostly Q8_0"});
}

TEST(DtypeBench, RefusesBatchSizesWithoutOne) {
  DtypeBenchOptions o;
  o.batch_sizes = {4, 8};
  EXPECT_THROW(run_dtype_bench(kModel, o), Error);
}

}  // namespace
}  // namespace dspark::bench
