// bench kernels on the shipped tiny model: every part is timed at every B, and the options a
// step's kernels cannot run are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "bench/kernel_bench.h"
#include "common/error.h"

namespace dspark::bench {
namespace {

namespace fs = std::filesystem;

const std::string kModel = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();

TEST(KernelBench, TimesEveryPartAtEveryB) {
  const model::Transformer model = model::Transformer::load(kModel, {.weight_dtype = model::WeightDType::kQ8_0});
  KernelBenchOptions o;
  o.context = 32;
  o.batch_sizes = {1, 4};
  o.warmup = 1;
  o.runs = 3;
  int rounds = 0;
  const KernelBenchResult r = run_kernel_bench(model, o, [&](const std::string& message) {
    if (message.find("round") != std::string::npos) ++rounds;
  });
  EXPECT_EQ(rounds, 3);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.points[0].n_new, 1);
  EXPECT_EQ(r.points[1].n_new, 4);
  for (const KernelPoint& p : r.points) {
    EXPECT_GT(p.linears_ms, 0);
    EXPECT_GT(p.lm_head_ms, 0);
    EXPECT_GT(p.attention_ms, 0);
    EXPECT_GT(p.attention_hot_ms, 0);
  }
  const model::ModelConfig& c = model.config();
  EXPECT_EQ(r.kv_bytes_per_step, 2 * c.n_layers * c.n_kv_heads * 32 * c.head_dim * 4);
}

TEST(KernelBench, RefusesWhatAStepsKernelsDoNotRun) {
  const model::Transformer model = model::Transformer::load(kModel, {});
  KernelBenchOptions o;
  o.batch_sizes = {0};
  EXPECT_THROW(run_kernel_bench(model, o), Error);
  o.batch_sizes = {65};
  EXPECT_THROW(run_kernel_bench(model, o), Error);
  o.batch_sizes = {1};
  o.context = 0;
  EXPECT_THROW(run_kernel_bench(model, o), Error);
}

}  // namespace
}  // namespace dspark::bench
