#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "train/bpe_trainer.h"
#include "train/corpus.h"

namespace dspark::train {
namespace {

using dspark::test::TempDir;

std::vector<std::string> repeated(const std::vector<std::pair<std::string, int>>& words) {
  std::vector<std::string> texts;
  for (const auto& [word, n] : words) texts.insert(texts.end(), n, word);
  return texts;
}

std::vector<std::string> merge_strings(const TrainedBpe& bpe) {
  std::vector<std::string> out;
  for (const auto& [left, right] : bpe.merges) out.push_back(bpe.tokens[left] + "+" + bpe.tokens[right]);
  return out;
}

// A small mixed corpus: prose, Python, LaTeX, ChatML-rendered turns, accents and CJK.
std::vector<std::string> mixed_corpus() {
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) {
    const std::string n = std::to_string(i);
    texts.push_back("The quick brown fox jumps over the lazy dog " + n + " times.\nThen it rests.");
    texts.push_back("def add_" + n + "(x, y):\n    \"\"\"Return x + y.\"\"\"\n    return x + y  # " + n + "\n");
    texts.push_back("Solve $x^2 + " + n + "x = 0$, so \\boxed{" + n + "}.");
    texts.push_back(render_record(Record{Domain::kChat, "t", "t/" + n,
                                         {{"user", "Hello, how are you " + n + "?"}, {"assistant", "Fine, thanks!"}}, ""})
                        .text);
    texts.push_back("Café naïve résumé — 你好，世界 " + n + " 🙂");
  }
  return texts;
}

TEST(BpeTrainer, PatternIsTheOneOfTheQwen3Tokenizer) {
  const std::string json_text = test::read_text(test::fixture("qwen3-tokenizer") / "tokenizer.json");
  const size_t at = json_text.find("\"Regex\"");
  ASSERT_NE(at, std::string::npos);
  const size_t open = json_text.find('"', json_text.find(':', at));
  size_t close = open + 1;
  while (json_text[close] != '"') close += json_text[close] == '\\' ? 2 : 1;
  const std::string pattern = nlohmann::json::parse(json_text.substr(open, close - open + 1)).get<std::string>();
  EXPECT_EQ(pattern, kQwenPretokenizerPattern);
}

// Pair counts: hu 15, ug 20, pu 17, un 16, bu 4, gs 5. After ug (20): un 16, then h+ug 15, p+un 12,
// then a tie at 5 between hug+s and p+ug that the smaller left string ("hug" < "p") wins, then b+un.
TEST(BpeTrainer, FirstMergesMatchAHandComputedExample) {
  BpeTrainer trainer(BpeTrainerOptions{.vocab_size = 256 + 7 + 6});
  trainer.count(repeated({{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}}));
  EXPECT_EQ(trainer.total_words(), 36u);
  EXPECT_EQ(trainer.distinct_words(), 5u);
  const TrainedBpe bpe = trainer.train();
  EXPECT_EQ(merge_strings(bpe),
            (std::vector<std::string>{"u+g", "u+n", "h+ug", "p+un", "hug+s", "p+ug", "b+un"}));
  EXPECT_EQ(bpe.vocab_size(), 256 + 7 + 6);
  EXPECT_EQ(bpe.tokens[256], "ug");
  EXPECT_EQ(bpe.tokens.back(), "bun");
}

// Overlapping occurrences: "aaaa" has three (a, a) pairs but merges into two "aa", then one "aaaa".
TEST(BpeTrainer, OverlappingPairsAreCountedAfterEachMerge) {
  BpeTrainer trainer(BpeTrainerOptions{.vocab_size = 256 + 2 + 6});
  trainer.count(std::vector<std::string>{"aaaa", "aaaa", "ab"});
  EXPECT_EQ(merge_strings(trainer.train()), (std::vector<std::string>{"a+a", "aa+aa"}));
}

TEST(BpeTrainer, SpecialTokensInTheTextAreNotLearned) {
  BpeTrainer trainer(BpeTrainerOptions{.vocab_size = 256 + 1 + 6});
  trainer.count("<|im_start|><|im_start|><|im_start|>xy");
  // Only the plain text "xy" is counted; the special tokens never form pairs.
  EXPECT_EQ(trainer.total_words(), 1u);
  EXPECT_EQ(merge_strings(trainer.train()), (std::vector<std::string>{"x+y"}));
}

TEST(BpeTrainer, SameResultWithOneOrSeveralThreads) {
  BpeTrainer one(BpeTrainerOptions{.vocab_size = 400, .threads = 1});
  BpeTrainer two(BpeTrainerOptions{.vocab_size = 400, .threads = 2});
  one.count(mixed_corpus());
  two.count(mixed_corpus());
  const TrainedBpe a = one.train(), b = two.train();
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.merges, b.merges);
}

TEST(BpeTrainer, WrittenTokenizerLoadsWithExactSizeAndDeclaredIds) {
  TempDir dir;
  BpeTrainer trainer(BpeTrainerOptions{.vocab_size = 400});
  trainer.count(mixed_corpus());
  size_t progress_calls = 0;
  const TrainedBpe bpe = trainer.train([&](const BpeProgress& p) {
    ++progress_calls;
    EXPECT_EQ(p.merges_total, 400u - 256 - 6);
  });
  EXPECT_EQ(progress_calls, bpe.merges.size());
  write_tokenizer_files(bpe, dir.path(), {.model_max_length = 2048});

  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(dir.path());
  EXPECT_EQ(tok.vocab_size(), 400);
  const std::vector<SpecialToken> specials = default_special_tokens();
  for (size_t i = 0; i < specials.size(); ++i) {
    const int32_t id = 400 - 6 + static_cast<int32_t>(i);
    EXPECT_EQ(tok.token_to_id(specials[i].content), id) << specials[i].content;
    EXPECT_EQ(bpe.special_id(specials[i].content), id);
    EXPECT_TRUE(tok.is_added(id));
    EXPECT_EQ(tok.is_special(id), specials[i].special) << specials[i].content;
  }
  EXPECT_FALSE(tok.is_special(*tok.token_to_id("<think>")));  // as in Qwen3
  EXPECT_EQ(tok.eos_id(), tok.token_to_id("<|im_end|>"));
  EXPECT_EQ(tok.pad_id(), tok.token_to_id("<|endoftext|>"));
  EXPECT_EQ(tok.token_to_id("!"), 0);  // byte tokens in byte-level alphabet order, as GPT-2 / Qwen
  EXPECT_EQ(tok.token_to_id("\xC4\xA0"), 220);  // "Ġ", the space byte

  const nlohmann::json config = nlohmann::json::parse(test::read_text(dir / "tokenizer_config.json"));
  EXPECT_EQ(config["model_max_length"], 2048);
  EXPECT_EQ(config["added_tokens_decoder"]["399"]["content"], "<|mask|>");
  const nlohmann::json json_file = nlohmann::json::parse(test::read_text(dir / "tokenizer.json"));
  EXPECT_EQ(json_file["model"]["merges"].size(), bpe.merges.size());
  EXPECT_EQ(json_file["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], kQwenPretokenizerPattern);
}

TEST(BpeTrainer, TrainedTokenizerRoundTripsTextIncludingUnseenText) {
  TempDir dir;
  BpeTrainer trainer(BpeTrainerOptions{.vocab_size = 360});
  trainer.count(mixed_corpus());
  write_tokenizer_files(trainer.train(), dir.path());
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(dir / "tokenizer.json");

  const std::vector<std::string> samples{
      "The quick brown fox jumps over the lazy dog 7 times.",
      "def add(x, y):\n\treturn x + y  # tabs\r\n",
      "<|im_start|>user\nCafe\xCC\x81 na\xC3\xAFve?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOk<|im_end|>",
      "Unseen: Ωμέγα, Привет, こんにちは, 😀👍 \\frac{a}{b} {{x}} <|endoftext|>",
      "   leading and trailing spaces   \n\n\n",
      "e\xCC\x81 (decomposed) vs \xC3\xA9 (composed)",
  };
  for (const std::string& text : samples) {
    const std::vector<int32_t> ids = tok.encode(text);
    EXPECT_EQ(tok.decode(ids), tokenizer::nfc(text)) << text;
  }
  // Special tokens encode to their own ids, and the training text compresses below 1 token per byte.
  const std::vector<int32_t> ids = tok.encode("<|im_start|>user\nThe quick brown fox<|im_end|>");
  EXPECT_EQ(ids.front(), tok.token_to_id("<|im_start|>"));
  EXPECT_EQ(ids.back(), tok.token_to_id("<|im_end|>"));
  const std::string sentence = "The quick brown fox jumps over the lazy dog";
  EXPECT_LT(tok.encode(sentence).size(), sentence.size() / 2);
}

TEST(BpeTrainer, EncodingATrainingWordGivesItsMergedToken) {
  TempDir dir;
  BpeTrainer trainer(BpeTrainerOptions{.vocab_size = 256 + 7 + 6});
  trainer.count(repeated({{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}}));
  write_tokenizer_files(trainer.train(), dir.path());
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(dir.path());
  EXPECT_EQ(tok.encode("hugs"), std::vector<int32_t>{*tok.token_to_id("hugs")});
  EXPECT_EQ(tok.encode("bun"), std::vector<int32_t>{*tok.token_to_id("bun")});
  EXPECT_EQ(tok.encode("bug"), (std::vector<int32_t>{*tok.token_to_id("b"), *tok.token_to_id("ug")}));
}

TEST(BpeTrainer, ChatTemplateIsChatmlWithTheNonThinkingSwitch) {
  TempDir dir;
  BpeTrainer trainer(BpeTrainerOptions{.vocab_size = 300});
  trainer.count(mixed_corpus());
  write_tokenizer_files(trainer.train(), dir.path());
  EXPECT_TRUE(tokenizer::is_chatml_template(chat_template_source()));
  EXPECT_EQ(chat_template_source().find("tool"), std::string_view::npos);

  const tokenizer::ChatTemplate chat = tokenizer::ChatTemplate::load(dir.path());
  EXPECT_TRUE(chat.has_thinking_switch());
  EXPECT_FALSE(chat.default_system_prompt().has_value());
  const std::vector<tokenizer::ChatMessage> conversation{{"system", "Be brief."}, {"user", "What is 2+2?"}};
  EXPECT_EQ(chat.render(conversation, {.add_generation_prompt = true, .enable_thinking = false}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(chat.render(conversation, {.add_generation_prompt = true, .enable_thinking = true}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");

  // Reasoning is kept only after the last user query (what jinja2 renders from the same source).
  const std::vector<tokenizer::ChatMessage> two_turns{{"user", "hi"},
                                                      {"assistant", "<think>\nr1\n</think>\n\nhello"},
                                                      {"user", "again"},
                                                      {"assistant", "<think>r2</think>ok"}};
  EXPECT_EQ(chat.render(two_turns, {.add_generation_prompt = false}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nr2\n</think>\n\nok<|im_end|>\n");

  // The training text of a single-turn record starts with exactly the prompt `generate --chat` builds.
  const Record record{Domain::kMath, "t", "t/0", {{"user", "What is 2+2?"}, {"assistant", "4"}}, ""};
  const std::string prompt = chat.render({{"user", "What is 2+2?"}}, {.add_generation_prompt = true, .enable_thinking = false});
  EXPECT_EQ(render_record(record).text, prompt + "4<|im_end|>\n");
}

TEST(BpeTrainer, RejectsBadSettingsAndInput) {
  EXPECT_THROW(BpeTrainer(BpeTrainerOptions{.vocab_size = 262}), Error);  // no room for a merge
  EXPECT_THROW(BpeTrainer(BpeTrainerOptions{.vocab_size = 300, .special_tokens = {{"<a>"}, {"<a>"}}}), Error);

  BpeTrainer small(BpeTrainerOptions{.vocab_size = 1000});
  small.count("tiny corpus");
  EXPECT_THROW(small.train(), Error);  // runs out of pairs

  BpeTrainer trainer;
  EXPECT_THROW(trainer.count(std::string("bad \xFF byte")), Error);
  EXPECT_THROW(trainer.count(std::vector<std::string>{"fine", "bad \xC3"}), Error);

  TempDir dir;
  BpeTrainer no_chatml(BpeTrainerOptions{.vocab_size = 258, .special_tokens = {{"<|endoftext|>"}}});
  no_chatml.count("abab");
  EXPECT_THROW(write_tokenizer_files(no_chatml.train(), dir.path()), Error);
}

}  // namespace
}  // namespace dspark::train
