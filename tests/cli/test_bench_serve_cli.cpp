// `dspark bench serve` measures a step-cost profile only for the schedules that plan with it (the
// dspark ones): with `none` and `mtp1` alone it serves at once, caches nothing, and its cost-model
// column stays empty.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;

TEST(BenchServeCli, SchedulesWithoutTheProfileMeasureNone) {
  test::TempDir cache;
  const test::ScopedEnv cache_dir("DSPARK_CACHE", cache.str());
  const std::string source = DSPARK_SOURCE_DIR;
  const test::CommandResult r = test::run_dspark(
      "--threads 1 bench serve --target " + source + "/models/tiny-target-8l --draft " + source +
      "/models/tiny-target-8l-dspark --schedule none,mtp1 --concurrency 1 --repeats 1 --limit 4 --max-tokens 4 "
      "--prompts " + (test::shared_dir() / "data/chat/vicuna_bench/question.jsonl").string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("not measuring one"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(cache.path()));  // no profile measured or cached
  const nlohmann::json points = nlohmann::json::parse(r.out);
  ASSERT_EQ(points.size(), 2u) << r.out;
  for (const auto& p : points) {
    EXPECT_GT(p["output_tokens"].get<int64_t>(), 0);
    EXPECT_EQ(p["cost_model"]["steps"].get<int64_t>(), 0);  // nothing to compare the steps with
  }
}

}  // namespace
}  // namespace dspark
