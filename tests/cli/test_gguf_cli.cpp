// The CLI with GGUF files: `model quantize` writes one, and `logits` / `generate` take it as
// --model (weights, config and tokenizer all from the file).
#include <gtest/gtest.h>

#include "../model/gguf_test_util.h"
#include "model/gguf.h"

namespace dspark {
namespace {

TEST(GgufCli, QuantizeThenRunTheFile) {
  test::TempDir dir;
  const std::string gguf = dir.file("tiny-q8_0.gguf");
  const test::CommandResult q = test::run_dspark("model quantize --model " + test::fixture("tiny-qwen3-untied").string() +
                                                 " --type q8_0 --out " + gguf);
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(model::GgufFile::open(gguf).tensor("blk.0.attn_q.weight").type, model::GgmlType::kQ8_0);

  // Logits of the file we wrote equal those of llama.cpp's own Q8_0 file (same tensor bytes).
  const std::vector<int64_t> ids = test::gguf_expected("untied-q8_0.gguf")["cases"][1]["ids"];
  std::string csv;
  for (const int64_t id : ids) {
    if (!csv.empty()) csv += ',';
    csv += std::to_string(id);
  }
  for (const std::string& model : {gguf, test::gguf_fixture("untied-q8_0.gguf").string()}) {
    const test::CommandResult r = test::run_dspark("logits --model " + model + " --ids " + csv + " --out " +
                                                   dir.file(std::filesystem::path(model).filename().string() + ".f32"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(test::read_text(dir.file("tiny-q8_0.gguf.f32")), test::read_text(dir.file("untied-q8_0.gguf.f32")));

  // generate: the prompt is tokenized with the file's tokenizer and the output decoded with it.
  const test::CommandResult g = test::run_dspark("generate --model " + gguf + " --prompt 'the quick brown fox' --max-tokens 5 --json");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("\"text\""), std::string::npos) << g.out;
}

TEST(GgufCli, BadFilesAndTypesAreOneLineErrors) {
  test::TempDir dir;
  test::write_text(dir / "bad.gguf", "GGUF\x03");
  const test::CommandResult r = test::run_dspark("generate --model " + dir.file("bad.gguf") + " --prompt-ids 1,2 --max-tokens 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.gguf"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  const test::CommandResult q = test::run_dspark("model quantize --model " + test::fixture("tiny-qwen3-untied").string() +
                                                 " --type q5_1 --out " + dir.file("x.gguf"));
  EXPECT_EQ(q.exit_code, 1);
  EXPECT_NE(q.err.find("--type"), std::string::npos) << q.err;
}

}  // namespace
}  // namespace dspark
