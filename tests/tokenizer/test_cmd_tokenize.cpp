// `dspark tokenize` and `dspark bench tokenizer`, run as the real binary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "expect_error.h"
#include "test_util.h"

namespace dspark {
namespace {

using test::fixture;
using test::run_dspark;

const std::string kQwen3 = fixture("qwen3-tokenizer").string();

using test::expect_one_line_error;

TEST(CmdTokenize, TextPrintsOneIdsLine) {
  const auto r = run_dspark("tokenize --tokenizer " + kQwen3 + " --text 'Hello, world!'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[9707,11,1879,0]}\n");
}

TEST(CmdTokenize, JsonlPrintsOneLinePerRecord) {
  test::TempDir dir;
  // A blank line (a trailing one, say) holds no record and is skipped, as JSONL readers do.
  test::write_text(dir / "in.jsonl", "{\"text\":\"hello world\"}\n\n{\"text\":\"<|endoftext|>\",\"id\":7}\n  \n");
  const auto r = run_dspark("tokenize --tokenizer " + kQwen3 + " --jsonl " + (dir / "in.jsonl").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[14990,1879]}\n{\"ids\":[151643]}\n");
}

TEST(CmdTokenize, BadJsonlLineNamesFileAndLine) {
  test::TempDir dir;
  const std::string file = (dir / "in.jsonl").string();
  test::write_text(file, "{\"text\":\"ok\"}\n{\"text\": \n");
  expect_one_line_error(run_dspark("tokenize --tokenizer " + kQwen3 + " --jsonl " + file), {file + ":2", "JSON"});
  test::write_text(file, "{\"text\":\"ok\"}\n{\"text\":\"ok\"}\n{\"prompt\":\"x\"}\n");
  expect_one_line_error(run_dspark("tokenize --tokenizer " + kQwen3 + " --jsonl " + file), {file + ":3", "\"text\""});
}

TEST(CmdTokenize, NeedsExactlyOneInput) {
  EXPECT_NE(run_dspark("tokenize --tokenizer " + kQwen3).exit_code, 0);
  EXPECT_NE(run_dspark("tokenize --tokenizer " + kQwen3 + " --text a --jsonl b").exit_code, 0);
}

TEST(CmdTokenize, MissingTokenizerIsOneLineError) {
  test::TempDir dir;
  expect_one_line_error(run_dspark("tokenize --tokenizer " + (dir / "nope").string() + " --text a"),
                        {(dir / "nope").string()});
  test::write_text(dir / "tokenizer.json", "{");
  expect_one_line_error(run_dspark("tokenize --tokenizer " + dir.path().string() + " --text a"),
                        {(dir / "tokenizer.json").string(), "JSON"});
}

TEST(CmdBenchTokenizer, JsonReportsThroughput) {
  test::TempDir dir;
  std::string corpus;
  while (corpus.size() < 200000) corpus += "def f(x):\n    return x * 2  # the quick brown fox jumps\n";
  test::write_text(dir / "corpus.txt", corpus);
  const auto r =
      run_dspark("bench tokenizer --tokenizer " + kQwen3 + " --file " + (dir / "corpus.txt").string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["bytes"], corpus.size());
  EXPECT_GE(report["runs"].get<int>(), 5);
  EXPECT_GT(report["mb_per_s"].get<double>(), 0.0);
  EXPECT_GT(report["tokens_per_s"].get<double>(), 0.0);
}

}  // namespace
}  // namespace dspark
