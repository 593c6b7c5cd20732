// `dspark train confidence` end to end on the tiny pair: rollouts on a corpus's training prompts,
// the refitted drafter written beside them with only the head's tensors changed, a resumed run
// (one chunk lost) writing the same bytes, and bad arguments refused with one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "model/safetensors.h"
#include "test_util.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;
const std::string kTarget = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l").string();
const std::string kDraft = (fs::path(DSPARK_SOURCE_DIR) / "models/tiny-target-8l-dspark").string();

void write_corpus(const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream out(dir / "train.jsonl");
  const char* questions[] = {"What is the capital of France?", "Write a haiku about rain.", "What is 12 times 7?",
                             "Name three colours.",            "Explain what a noun is.",  "Say hello in Spanish."};
  for (const char* q : questions)
    out << nlohmann::json{{"domain", "chat"}, {"source", "test"}, {"id", std::string("test/") + q},
                          {"messages", {{{"role", "user"}, {"content", q}}, {{"role", "assistant"}, {"content", "ok"}}}}}
               .dump()
        << "\n";
}

std::string refit_args(const fs::path& corpus, const fs::path& out) {
  return "train confidence --target " + kTarget + " --draft " + kDraft + " --corpus " + corpus.string() +
         " --limit 6 --chunk 3 --max-tokens 24 --holdout-percent 25 --out " + out.string();
}

std::vector<float> tensor_values(const model::SafetensorsArchive& a, const std::string& name) {
  const model::TensorView& v = a.get(name);
  std::vector<float> out;
  const auto* bits = static_cast<const uint16_t*>(v.data);
  for (int64_t i = 0; i < v.numel(); ++i) out.push_back(model::bf16_to_f32(bits[i]));
  return out;
}

TEST(TrainConfidenceCli, WritesTheDrafterWithANewHeadAndResumesToTheSameBytes) {
  test::TempDir dir;
  write_corpus(dir / "corpus");
  const fs::path out = dir / "refit";
  const test::CommandResult first = test::run_dspark(refit_args(dir / "corpus", out));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("weighted over positions"), std::string::npos) << first.out;
  EXPECT_TRUE(fs::exists(out / "rollouts/chunk-00000.pt"));
  EXPECT_TRUE(fs::exists(out / "rollouts/chunk-00001.pt"));
  EXPECT_TRUE(fs::exists(out / "config.json"));
  EXPECT_FALSE(fs::exists(out / "sts.json"));  // fitted to the old head
  const nlohmann::json summary = nlohmann::json::parse(test::read_text(out / "confidence_refit.json"));
  EXPECT_GT(summary["rounds_fit"].get<int64_t>(), 0);
  EXPECT_GT(summary["rounds_held_out"].get<int64_t>(), 0);

  {
    const auto source = model::SafetensorsArchive::open(kDraft);
    const auto refit = model::SafetensorsArchive::open((out / "model.safetensors").string());
    EXPECT_EQ(source.names(), refit.names());
    EXPECT_NE(tensor_values(source, "confidence_head.proj.weight"), tensor_values(refit, "confidence_head.proj.weight"));
    EXPECT_EQ(refit.get("confidence_head.proj.weight").dtype, source.get("confidence_head.proj.weight").dtype);
    EXPECT_EQ(tensor_values(source, "markov_head.markov_w1.weight"), tensor_values(refit, "markov_head.markov_w1.weight"));
  }
  // The refitted drafter drafts (its step-cost profile goes to the test's own cache).
  const test::ScopedEnv cache("DSPARK_CACHE", (dir / "cache").string());
  const test::CommandResult gen = test::run_dspark("generate --model " + kTarget + " --draft " + out.string() +
                                                   " --prompt hello --max-tokens 8");
  EXPECT_EQ(gen.exit_code, 0) << gen.err;

  // Lose the second chunk and the output: the rerun loads chunk 0, redoes chunk 1 with the same
  // seeds, and writes the same file.
  const std::string bytes = test::read_text(out / "model.safetensors");
  fs::remove(out / "rollouts/chunk-00001.pt");
  fs::remove(out / "model.safetensors");
  const test::CommandResult second = test::run_dspark(refit_args(dir / "corpus", out));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(test::read_text(out / "model.safetensors"), bytes);
}

TEST(TrainConfidenceCli, RefusesToOverwriteTheDrafterItReads) {
  test::TempDir dir;
  write_corpus(dir / "corpus");
  test::expect_one_line_error(test::run_dspark("train confidence --target " + kTarget + " --draft " + kDraft +
                                               " --corpus " + (dir / "corpus").string() + " --out " + kDraft),
                              {"--out"});
}

TEST(TrainConfidenceCli, ACorpusWithoutConversationsIsAnError) {
  test::TempDir dir;
  fs::create_directories(dir / "corpus");
  test::write_text(dir / "corpus/train.jsonl", "");
  test::expect_one_line_error(test::run_dspark(refit_args(dir / "corpus", dir / "refit")), {"train.jsonl"});
}

}  // namespace
}  // namespace dspark
