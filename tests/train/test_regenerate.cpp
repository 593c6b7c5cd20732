// dspark data regenerate: conversations replayed turn by turn with the target's own answers, the
// loss mask on answers and their <|im_end|>, and resuming by skipping finished conversations.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/corpus.h"
#include "train/regenerate.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;
const fs::path kTarget = test::fixture("tiny-qwen3-tied");

void write_corpus(const fs::path& file, int n) {
  std::ofstream out(file);
  for (int i = 0; i < n; ++i) {
    train::Record r;
    r.source = "test";
    r.id = "test/" + std::to_string(i);
    r.messages = {{"user", "question " + std::to_string(i)}, {"assistant", "original answer, discarded"}};
    if (i % 2 == 0) r.messages.insert(r.messages.end(), {{"user", "and a follow-up"}, {"assistant", "discarded too"}});
    out << train::record_to_json(r) << "\n";
  }
  train::Record raw;
  raw.source = "raw";
  raw.id = "raw/0";
  raw.text = "raw text is not a conversation";
  out << train::record_to_json(raw) << "\n";
}

train::RegenerateOptions options(const test::TempDir& dir) {
  train::RegenerateOptions o;
  o.corpus_file = dir / "train.jsonl";
  o.out_file = dir / "out.jsonl";
  o.max_new_tokens = 12;
  o.max_length = 200;
  o.batch = 3;
  o.sampling = {.temperature = 1.0};
  return o;
}

TEST(Regenerate, ReplaysEveryUserTurnWithTheTargetsAnswers) {
  test::TempDir dir;
  write_corpus(dir / "train.jsonl", 5);
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(kTarget / "tokenizer.json");
  const train::RegenerateSummary s = train::regenerate(target, tok, options(dir));
  EXPECT_EQ(s.conversations, 5);
  const auto samples = train::read_regenerated(dir / "out.jsonl");
  ASSERT_EQ(samples.size(), 5u);
  const int32_t im_end = *tok.token_to_id("<|im_end|>");
  const std::string original = "original answer";
  for (const auto& smp : samples) {
    SCOPED_TRACE(smp.id);
    // The prompt side (loss mask 0) is rendered text; the answers are the target's, whose ids
    // this random fixture may draw beyond the tokenizer's vocabulary.
    std::vector<int32_t> prompt_side;
    for (size_t i = 0; i < smp.input_ids.size(); ++i)
      if (!smp.loss_mask[i]) prompt_side.push_back(smp.input_ids[i]);
    const std::string text = tok.decode(prompt_side);
    EXPECT_EQ(text.find(original), std::string::npos) << "the corpus answer leaked in";
    EXPECT_NE(text.find("question"), std::string::npos);
    if (smp.turns == 2) {
      EXPECT_NE(text.find("and a follow-up"), std::string::npos);
    }
    // The rendered prompt of the first turn is exactly what `generate --chat` feeds the model.
    const std::vector<int32_t> prompt = tok.encode(
        "<|im_start|>user\nquestion " + smp.id.substr(5) + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    ASSERT_GE(smp.input_ids.size(), prompt.size());
    EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), smp.input_ids.begin()));
    EXPECT_EQ(std::count(smp.loss_mask.begin(), smp.loss_mask.begin() + prompt.size(), 1), 0);
    // Every answer span ends with <|im_end|> unless the answer was cut at max_new_tokens.
    for (size_t i = 0; i + 1 < smp.loss_mask.size(); ++i)
      if (smp.loss_mask[i] && !smp.loss_mask[i + 1]) {
        EXPECT_EQ(smp.input_ids[i], im_end);
      }
    if (smp.finish == "stop") {
      EXPECT_EQ(smp.input_ids.back(), im_end);
      EXPECT_EQ(smp.turns, smp.id.back() % 2 == 0 ? 2 : 1);  // even ids have a follow-up turn
    }
  }
}

TEST(Regenerate, ResumeSkipsFinishedConversationsAndRepairsACutLine) {
  test::TempDir dir;
  write_corpus(dir / "train.jsonl", 6);
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(kTarget / "tokenizer.json");
  train::RegenerateOptions o = options(dir);
  o.limit = 3;
  train::regenerate(target, tok, o);
  { std::ofstream(dir / "out.jsonl", std::ios::app) << "{\"id\":\"test/5\",\"input"; }  // interrupted write
  o.limit = 0;
  const train::RegenerateSummary s = train::regenerate(target, tok, o);
  EXPECT_EQ(s.skipped, 3);
  EXPECT_EQ(s.conversations, 3);
  std::set<std::string> ids;
  for (const auto& smp : train::read_regenerated(dir / "out.jsonl")) EXPECT_TRUE(ids.insert(smp.id).second) << smp.id;
  EXPECT_EQ(ids.size(), 6u);
}

}  // namespace
}  // namespace dspark
