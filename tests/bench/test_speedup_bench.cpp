// bench speedup: the summary pairs each run with the baseline's run of the same prompt (medians,
// pools and the all-files row checked on hand-made runs); a real run on the shipped tiny model
// rotates the methods' order from prompt to prompt and, greedy, every method generates the same
// number of tokens (speculative decoding is lossless); the CLI prints one JSON cell per method and
// file and refuses a bad temperature.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/accept_bench.h"
#include "bench/speedup_bench.h"
#include "draft/load_drafter.h"
#include "expect_error.h"
#include "test_util.h"

namespace dspark::bench {
namespace {

namespace fs = std::filesystem;

const std::string kModel = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();
const std::string kDrafter = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l-dspark").string();

SpeedupRun run_of(int64_t method, int64_t file, int64_t prompt, int64_t tokens, double seconds, int64_t steps) {
  SpeedupRun r{.method = method, .file = file, .prompt = prompt, .temperature = 0};
  r.stats.generated_tokens = tokens;
  r.stats.seconds = seconds;
  for (int64_t s = 0; s < steps; ++s) r.stats.record_step(0, 0, tokens / steps);
  return r;
}

const SpeedupCell& cell(const std::vector<SpeedupCell>& cells, int64_t method, int64_t file) {
  for (const SpeedupCell& c : cells)
    if (c.method == method && c.file == file) return c;
  throw std::runtime_error("no cell");
}

TEST(SpeedupBench, PairsEachRunWithTheBaselinesRunOfTheSamePrompt) {
  // Two files: file 0 has three prompts, file 1 one. Method 1 is 2x, 3x, 4x the baseline on file 0
  // and 1x on file 1, with the baseline's speed differing from prompt to prompt.
  const std::vector<SpeedupRun> runs = {
      run_of(0, 0, 0, 10, 1.0, 10), run_of(1, 0, 0, 10, 0.5, 5),   // 10 -> 20 tok/s
      run_of(0, 0, 1, 10, 2.0, 10), run_of(1, 0, 1, 10, 2.0 / 3, 2),  // 5 -> 15
      run_of(0, 0, 2, 20, 1.0, 20), run_of(1, 0, 2, 20, 0.25, 4),  // 20 -> 80
      run_of(0, 1, 0, 10, 1.0, 10), run_of(1, 1, 0, 10, 1.0, 10),  // 10 -> 10
  };
  const std::vector<SpeedupCell> cells = summarize_speedup(runs, 2, 2);
  EXPECT_EQ(cells.size(), 6u);  // 2 methods x (2 files + all)
  EXPECT_DOUBLE_EQ(cell(cells, 0, 0).ratio, 1.0);
  EXPECT_DOUBLE_EQ(cell(cells, 0, -1).ratio, 1.0);
  const SpeedupCell& fast = cell(cells, 1, 0);
  EXPECT_EQ(fast.prompts, 3);
  EXPECT_DOUBLE_EQ(fast.ratio, 3.0);                        // median of 2, 3, 4
  EXPECT_NEAR(fast.tokens_per_second, 40 / (0.5 + 2.0 / 3 + 0.25), 1e-9);  // pooled, not a mean of rates
  EXPECT_NEAR(fast.acceptance_length, 40.0 / 11, 1e-9);    // committed over steps, pooled
  EXPECT_LE(fast.ratio_low, fast.ratio);
  EXPECT_GE(fast.ratio_high, fast.ratio);
  EXPECT_GE(fast.ratio_low, 2.0);
  EXPECT_LE(fast.ratio_high, 4.0);
  EXPECT_DOUBLE_EQ(cell(cells, 1, 1).ratio, 1.0);
  EXPECT_EQ(cell(cells, 1, -1).prompts, 4);
  EXPECT_DOUBLE_EQ(cell(cells, 1, -1).ratio, 2.5);  // median of 1, 2, 3, 4
}

TEST(SpeedupBench, GreedyMethodsGenerateTheSameTokensInARotatingOrder) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kModel);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(kModel);
  const std::vector<std::vector<std::vector<int64_t>>> prompts = {
      chat_prompt_ids(kModel, tok, read_prompts((test::shared_dir() / "data/eval/gsm8k.jsonl").string(), "auto", 3))};
  auto dspark = draft::load_drafter("", kDrafter, target, {.max_slots = 1, .capacity = 2048});
  auto ngram = draft::load_drafter("ngram", "", target, {.max_slots = 1, .capacity = 2048});
  const std::vector<SpeedupMethod> methods = {
      {.label = "autoregressive"},
      {.label = "dspark", .drafter = dspark.get(), .gamma = 7, .schedule = schedule::ScheduleKind::kFixed},
      {.label = "ngram", .drafter = ngram.get(), .gamma = 4, .schedule = schedule::ScheduleKind::kFixed}};
  const std::vector<SpeedupRun> runs = run_speedup(target, methods, prompts, {}, {.temperatures = {0.0}, .max_tokens = 24});
  ASSERT_EQ(runs.size(), 9u);
  for (int64_t prompt = 0; prompt < 3; ++prompt) {
    EXPECT_EQ(runs[static_cast<size_t>(3 * prompt)].method, prompt);  // prompt i starts with method i
    for (int64_t turn = 0; turn < 3; ++turn) {
      const SpeedupRun& r = runs[static_cast<size_t>(3 * prompt + turn)];
      EXPECT_EQ(r.prompt, prompt);
      EXPECT_EQ(r.stats.generated_tokens, 24);  // no stop ids
      EXPECT_GT(r.stats.seconds, 0);
    }
  }
  const std::vector<SpeedupCell> cells = summarize_speedup(runs, 3, 1);
  EXPECT_DOUBLE_EQ(cell(cells, 0, -1).acceptance_length, 1.0);
  EXPECT_GT(cell(cells, 1, -1).acceptance_length, 1.5);  // the trained drafter is accepted
}

TEST(SpeedupBench, CliPrintsACellPerMethodAndFile) {
  test::TempDir dir;
  const fs::path prompts = dir / "two.jsonl";
  test::write_text(prompts, "{\"turns\": [\"What is 2 plus 3?\"]}\n{\"turns\": [\"Name a prime number.\"]}\n");
  const test::CommandResult r =
      test::run_dspark("bench speedup --target " + kModel + " --draft " + kDrafter + " --ngram --prompts " +
                       prompts.string() + " --max-tokens 8 --temperatures 0,1 --schedule fixed --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["methods"], nlohmann::json({"autoregressive", "ngram", "tiny-target-8l-dspark"}));
  EXPECT_EQ(out["cells"].size(), 12u);  // 3 methods x (1 file + all) x 2 temperatures
  for (const auto& c : out["cells"]) EXPECT_EQ(c["prompts"], 2);
}

TEST(SpeedupBench, CliRefusesANegativeTemperature) {
  test::expect_one_line_error(test::run_dspark("bench speedup --target " + kModel + " --ngram --prompts x.jsonl --temperatures 0,-1"),
                        {"--temperatures", "-1"});
}

}  // namespace
}  // namespace dspark::bench
