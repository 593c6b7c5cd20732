// `dspark generate` through the batched engine with a schedule that reads the step-cost profile,
// on a machine where none is cached yet: it measures one on the drafter it generates with (whose
// cache must also fit the profile's 256-position context, however short the request) and saves it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "test_util.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;

TEST(GenerateBatched, ProfilesOnFirstUseWithAShortRequest) {
  test::TempDir cache;
  const test::ScopedEnv cache_dir("DSPARK_CACHE", cache.str());
  const std::string source = DSPARK_SOURCE_DIR;
  const test::CommandResult r = test::run_dspark(
      "--threads 1 generate --model " + source + "/models/tiny-target-8l --draft " + source +
      "/models/tiny-target-8l-dspark --prompt Hi --chat --max-tokens 8 --num-samples 2 --concurrency 2 "
      "--schedule dspark-async --temperature 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  int samples = 0;
  for (std::string line; std::getline(lines, line);) samples += line.find("\"ids\"") != std::string::npos;
  EXPECT_EQ(samples, 2);
  int profiles = 0;
  for (const auto& entry : fs::recursive_directory_iterator(cache.path())) profiles += entry.is_regular_file();
  EXPECT_EQ(profiles, 1) << "the measured profile is cached for the next run";
}

// --threshold reaches the threshold schedule: a cut of 1 admits no draft (no survival reaches 1),
// a cut of 0 all of them (7 a step but where the request's last tokens or a prefill step need
// fewer). The option once existed on bench serve alone.
TEST(GenerateBatched, ThresholdScheduleTakesItsCut) {
  const std::string source = DSPARK_SOURCE_DIR;
  auto mean_budget = [&](const std::string& cut) {
    const test::CommandResult r = test::run_dspark(
        "--threads 1 generate --model " + source + "/models/tiny-target-8l --draft " + source +
        "/models/tiny-target-8l-dspark --prompt Hi --chat --max-tokens 32 --concurrency 2 "
        "--schedule threshold --temperature 0 --threshold " + cut);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.err.find("mean budget ");
    EXPECT_NE(at, std::string::npos) << r.err;
    return at == std::string::npos ? -1.0 : std::stod(r.err.substr(at + 12));
  };
  EXPECT_EQ(mean_budget("1"), 0.0);
  EXPECT_GT(mean_budget("0"), 4.0);
}

// A profile named with --sps is used as given, but one measured for another setup says how it
// differs (another drafter's, another gamma's profile once planned in silence).
TEST(GenerateBatched, AnSpsFileOfAnotherSetupIsUsedWithAWarning) {
  test::TempDir dir;
  const std::string source = DSPARK_SOURCE_DIR;
  const std::string model = source + "/models/tiny-target-8l", sps = dir.file("sps.json");
  const test::CommandResult p = test::run_dspark("--threads 1 profile --model " + model + " --draft " + model +
                                                 "-dspark --max-requests 2 --runs 1 --out " + sps);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto generate = [&](const std::string& flags) {
    const test::CommandResult r = test::run_dspark("--threads 1 generate --model " + model + " --prompt Hi --max-tokens 4 "
                                                   "--schedule dspark-sync --temperature 0 --sps " + sps + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.err;
  };
  EXPECT_EQ(generate("--draft " + model + "-dspark").find("warning"), std::string::npos);
  const std::string other_gamma = generate("--draft " + model + "-dspark --gamma 3");
  EXPECT_NE(other_gamma.find("measured at gamma 7, this run drafts 3"), std::string::npos) << other_gamma;
  const std::string other_drafter = generate("--draft " + model + "-dflash");
  EXPECT_NE(other_drafter.find("was measured for tiny-target-8l"), std::string::npos) << other_drafter;
  EXPECT_NE(other_drafter.find("dflash"), std::string::npos) << other_drafter;
}

// Several samples printed as text each start with a line naming them (a sample ending without a
// newline ran into the next); a one-token answer has no decode rate and no acceptance, null
// rather than a measured 0.
TEST(GenerateBatched, TextSamplesAreSeparatedAndUndefinedRatesAreNull) {
  const std::string model = std::string(DSPARK_SOURCE_DIR) + "/models/tiny-target-8l";
  const test::CommandResult text = test::run_dspark("--threads 1 generate --model " + model +
                                                    " --prompt Hi --max-tokens 4 --num-samples 2 --temperature 0");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("--- sample 0 (seed 0) ---\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("--- sample 1 (seed 1) ---\n"), std::string::npos) << text.out;
  const test::CommandResult one = test::run_dspark("--threads 1 generate --model " + model + " --draft " + model +
                                                   "-dspark --prompt Hi --max-tokens 1 --ignore-eos --temperature 0 --json");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const nlohmann::json stats = nlohmann::json::parse(one.out)["stats"];
  EXPECT_EQ(stats["generated_tokens"], 1);
  for (const char* rate : {"tokens_per_second", "acceptance_length", "mean_acceptance_length", "acceptance_rate"})
    EXPECT_TRUE(stats[rate].is_null()) << rate << ": " << stats.dump();
}

}  // namespace
}  // namespace dspark
