#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "test_util.h"
#include "tokenizer/regex.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace dspark::tokenizer {
namespace {

namespace fs = std::filesystem;

const fs::path kQwen3Dir = fs::path(DSPARK_SHARED_DIR) / "fixtures" / "qwen3-tokenizer";
const fs::path kTinyDir = fs::path(DSPARK_SHARED_DIR) / "fixtures" / "tiny-qwen3-tied";

// U+13000 EGYPTIAN HIEROGLYPH A001: Qwen3 has no token for it, so its bytes span three tokens.
constexpr const char* kSplitCharacter = "\xF0\x93\x80\x80";

// Loading the 11 MB Qwen3 tokenizer once keeps the suite fast.
const Tokenizer& qwen3() {
  static const Tokenizer tokenizer = Tokenizer::load(kQwen3Dir);
  return tokenizer;
}

struct FixtureCase {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

std::vector<FixtureCase> read_cases() {
  std::ifstream in(kQwen3Dir / "cases.jsonl");
  std::vector<FixtureCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line);
    cases.push_back({record["text"], record["ids"].get<std::vector<int32_t>>(), record["decoded"]});
  }
  return cases;
}

std::string expect_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected dspark::Error";
  return {};
}

// Writes `contents` to dir/name and returns the path.
fs::path write_file(const test::TempDir& dir, const std::string& name, const std::string& contents) {
  test::write_text(dir / name, contents);
  return dir / name;
}

// A minimal valid byte-level BPE tokenizer.json with the given model and pre_tokenizer.
std::string tokenizer_json(
    const std::string& model,
    const std::string& pre_tokenizer = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})") {
  return R"({"normalizer":null,"pre_tokenizer":)" + pre_tokenizer + R"(,"decoder":{"type":"ByteLevel"},"model":)" +
         model + R"(,"added_tokens":[]})";
}

TEST(Qwen3Tokenizer, EncodesEveryFixtureCase) {
  const std::vector<FixtureCase> cases = read_cases();
  ASSERT_EQ(cases.size(), 180u);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(qwen3().encode(cases[i].text), cases[i].ids) << "case " << i << ": " << cases[i].text;
  }
}

TEST(Qwen3Tokenizer, DecodesEveryFixtureCase) {
  for (const FixtureCase& c : read_cases()) EXPECT_EQ(qwen3().decode(c.ids), c.decoded) << c.text;
}

TEST(Qwen3Tokenizer, ReportsVocabularyAndDeclaredTokens) {
  EXPECT_EQ(qwen3().vocab_size(), 151669);
  EXPECT_EQ(qwen3().token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(qwen3().token_to_id("Ġworld"), 1879);
  EXPECT_EQ(qwen3().token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(qwen3().id_to_token(1879), "Ġworld");
  EXPECT_EQ(qwen3().token_bytes(1879), " world");
  EXPECT_EQ(qwen3().eos_id(), 151645);
  EXPECT_EQ(qwen3().pad_id(), 151643);
  EXPECT_EQ(qwen3().bos_id(), std::nullopt);
  EXPECT_TRUE(qwen3().is_special(151644));
  EXPECT_FALSE(qwen3().is_special(151667));  // <think> is added but not special
  EXPECT_TRUE(qwen3().is_added(151667));
  EXPECT_TRUE(qwen3().has_id(151668));
  EXPECT_FALSE(qwen3().has_id(151669));
  EXPECT_FALSE(qwen3().has_id(-1));
}

TEST(Qwen3Tokenizer, RecognisesSpecialAndAddedTokensInText) {
  EXPECT_EQ(qwen3().encode("a<|im_start|><|im_end|>b"), (std::vector<int32_t>{64, 151644, 151645, 65}));
  EXPECT_EQ(qwen3().encode("<think>\n</think>"), (std::vector<int32_t>{151667, 198, 151668}));
  // A broken marker is plain text.
  const std::vector<int32_t> broken = qwen3().encode("<|im_start|");
  EXPECT_TRUE(std::find(broken.begin(), broken.end(), 151644) == broken.end());
}

TEST(Qwen3Tokenizer, SkipsSpecialTokensOnRequest) {
  const std::vector<int32_t> ids = qwen3().encode("<|im_start|>user\nhi<|im_end|><think>");
  EXPECT_EQ(qwen3().decode(ids, /*skip_special_tokens=*/true), "user\nhi<think>");
  EXPECT_EQ(qwen3().decode(ids), "<|im_start|>user\nhi<|im_end|><think>");
}

TEST(Qwen3Tokenizer, DecodeRejectsOutOfRangeIds) {
  const std::vector<int32_t> too_big{9707, 151669};
  const std::string message = expect_error([&] { qwen3().decode(too_big); });
  EXPECT_NE(message.find("151669"), std::string::npos) << message;
  const std::vector<int32_t> negative{-1};
  EXPECT_NE(expect_error([&] { qwen3().decode(negative); }).find("-1"), std::string::npos);
}

TEST(Qwen3Tokenizer, RejectsInvalidUtf8Text) {
  EXPECT_NE(expect_error([] { qwen3().encode("ok\xC3("); }).find("byte 2"), std::string::npos);
}

TEST(Qwen3Tokenizer, PartialCharactersDecodeToReplacementCharacter) {
  const std::vector<int32_t> ids = qwen3().encode(kSplitCharacter);
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(qwen3().decode(std::span(ids).first(1)), "\xEF\xBF\xBD");
}

TEST(Qwen3Tokenizer, LongRepetitiveWordsMatchTheirBytes) {
  const std::string long_word(5000, 'a');
  const std::vector<int32_t> ids = qwen3().encode(long_word);
  EXPECT_LT(ids.size(), 5000u);
  EXPECT_EQ(qwen3().decode(ids), long_word);
}

TEST(Qwen3Tokenizer, LoadsQuicklyAndEncodesFast) {
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer tokenizer = Tokenizer::load(kQwen3Dir / "tokenizer.json");
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(load_s, 3.0);  // generous: the machine is shared; typically well under one second
  std::string corpus;
  for (const FixtureCase& c : read_cases()) corpus += c.text;
  while (corpus.size() < (1 << 20)) corpus += corpus;
  const auto encode_start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer.encode(corpus);
  const double encode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - encode_start).count();
  EXPECT_FALSE(ids.empty());
  EXPECT_GT(corpus.size() / encode_s / 1e6, 1.0);  // a loose floor; `dspark bench tokenizer` measures
}

TEST(Qwen3Tokenizer, EncodesConsistentlyFromSeveralThreads) {
  const std::vector<FixtureCase> cases = read_cases();
  std::vector<std::vector<std::vector<int32_t>>> results(4);
  std::vector<std::thread> threads;
  const Tokenizer tokenizer = Tokenizer::load(kQwen3Dir);  // a fresh, shared word cache
  for (auto& result : results) {
    threads.emplace_back([&] {
      for (const FixtureCase& c : cases) result.push_back(tokenizer.encode(c.text));
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const auto& result : results) {
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(result[i], cases[i].ids) << cases[i].text;
  }
}

TEST(TinyTokenizer, RoundTripsText) {
  const Tokenizer tokenizer = Tokenizer::load(kTinyDir);
  EXPECT_EQ(tokenizer.vocab_size(), 461);
  for (const std::string text : {"Hello, world!", "the cat sat on the mat\n\n", "  spaces\tand\ttabs  ", "中文 😀 naïve",
                                 "<|im_start|>user\nhi<|im_end|>\n", "<think>\n\n</think>\n\n"}) {
    const std::vector<int32_t> ids = tokenizer.encode(text);
    for (int32_t id : ids) EXPECT_LT(id, tokenizer.vocab_size());
    EXPECT_EQ(tokenizer.decode(ids), text);
  }
  EXPECT_EQ(tokenizer.encode("<|im_end|>"), std::vector<int32_t>{458});
  EXPECT_EQ(tokenizer.eos_id(), 458);
}

TEST(StreamDecoder, ReleasesOnlyCompleteCharacters) {
  const std::string text = "a😀b中𓀀<|im_end|>é🦩";
  const std::vector<int32_t> ids = qwen3().encode(text);
  StreamDecoder stream(qwen3());
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_FALSE(find_invalid_utf8(piece).has_value()) << "piece with a split character";
    streamed += piece;
  }
  streamed += stream.flush();
  EXPECT_EQ(streamed, text);
}

TEST(StreamDecoder, HoldsBackASplitCharacter) {
  // The character's four bytes arrive over several tokens; nothing is released before the last.
  const std::vector<int32_t> ids = qwen3().encode(kSplitCharacter);
  ASSERT_GT(ids.size(), 1u);
  StreamDecoder stream(qwen3());
  for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(stream.push(ids[i]), "");
  EXPECT_EQ(stream.push(ids.back()), kSplitCharacter);
  EXPECT_EQ(stream.flush(), "");
}

TEST(StreamDecoder, FlushReplacesAnUnfinishedCharacter) {
  const std::vector<int32_t> ids = qwen3().encode(kSplitCharacter);
  StreamDecoder stream(qwen3());
  EXPECT_EQ(stream.push(ids[0]), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
}

TEST(Unicode, CompleteUtf8PrefixStopsBeforeUnfinishedSequence) {
  EXPECT_EQ(complete_utf8_prefix("ab"), 2u);
  EXPECT_EQ(complete_utf8_prefix("a\xF0\x9F"), 1u);
  EXPECT_EQ(complete_utf8_prefix("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(complete_utf8_prefix("a\xFF"), 2u);  // invalid, not unfinished: release it
}

TEST(Unicode, LossyDecodingReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("a\xF0\x9F"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
}

TEST(Unicode, NfcComposesOnlyWhereNeeded) {
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc("cafe\xCC\x81!"), "caf\xC3\xA9!");                         // e + combining acute -> é
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");                              // Angstrom sign -> Å
  EXPECT_EQ(nfc("\xED\x95\x9C\xEA\xB5\xAD"), "\xED\x95\x9C\xEA\xB5\xAD");  // Hangul stays
}

TEST(RegexTranslation, FollowsJavaScriptSemantics) {
  EXPECT_EQ(to_pcre2_pattern("(?i:'s|'t)"), "(?:'[sS]|'[tT])");
  EXPECT_EQ(to_pcre2_pattern("a\\u00e9"), "a\\x{00e9}");
  EXPECT_EQ(to_pcre2_pattern("(?i:[sdmt]|ll)x"), "(?:[sSdDmMtT]|[lL][lL])x");
  EXPECT_EQ(to_pcre2_pattern("\\p{N}{1,3}"), "\\p{N}{1,3}");
  // \s inside a class contributes its members, outside it becomes a class.
  const std::string translated = to_pcre2_pattern("[^\\s\\p{L}]\\s+");
  EXPECT_EQ(translated.find("\\s"), std::string::npos) << translated;
  const std::vector<Span> matches = Regex(to_pcre2_pattern("\\s+"), false)
                                        .find_all(
                                            "a\xC2\x85"
                                            "b\xEF\xBB\xBF");
  ASSERT_EQ(matches.size(), 1u);  // NEL is not JavaScript whitespace, the BOM is
  EXPECT_EQ(matches[0], (Span{4, 7}));
  EXPECT_THROW(to_pcre2_pattern("(?i)abc"), Error);
}

TEST(TokenizerLoad, MissingFileNamesThePath) {
  const std::string message = expect_error([] { Tokenizer::load("/nonexistent/dir/tokenizer.json"); });
  EXPECT_NE(message.find("/nonexistent/dir/tokenizer.json"), std::string::npos) << message;
  test::TempDir dir;
  EXPECT_NE(expect_error([&] { Tokenizer::load(dir.path()); }).find("no tokenizer.json"), std::string::npos);
}

TEST(TokenizerLoad, InvalidJsonNamesTheFile) {
  test::TempDir dir;
  const fs::path file = write_file(dir, "tokenizer.json", "{\"model\": [1, 2");
  const std::string message = expect_error([&] { Tokenizer::load(file); });
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

TEST(TokenizerLoad, RejectsUnsupportedModelTypes) {
  test::TempDir dir;
  const fs::path unigram = write_file(dir, "unigram.json", tokenizer_json(R"({"type":"Unigram","vocab":[["a",0.0]]})"));
  EXPECT_NE(expect_error([&] { Tokenizer::load(unigram); }).find("unsupported model type 'Unigram'"),
            std::string::npos);
  const fs::path wordpiece =
      write_file(dir, "wordpiece.json", tokenizer_json(R"({"type":"WordPiece","vocab":{"a":0}})"));
  EXPECT_NE(expect_error([&] { Tokenizer::load(wordpiece); }).find("'WordPiece'"), std::string::npos);
}

TEST(TokenizerLoad, RejectsUnknownPreTokenizer) {
  test::TempDir dir;
  const fs::path file = write_file(
      dir, "t.json", tokenizer_json(R"({"type":"BPE","vocab":{"a":0},"merges":[]})", R"({"type":"Whitespace"})"));
  EXPECT_NE(expect_error([&] { Tokenizer::load(file); }).find("unsupported pre_tokenizer 'Whitespace'"),
            std::string::npos);
}

TEST(TokenizerLoad, RejectsMergesOfUnknownTokens) {
  test::TempDir dir;
  const fs::path file =
      write_file(dir, "t.json", tokenizer_json(R"({"type":"BPE","vocab":{"a":0,"b":1},"merges":["a b"]})"));
  EXPECT_NE(expect_error([&] { Tokenizer::load(file); }).find("'ab', which is not in the vocabulary"),
            std::string::npos);
}

TEST(TokenizerLoad, AcceptsStringMergesAndIgnoreMerges) {
  test::TempDir dir;
  // "abc" is in the vocabulary but no merge builds it: only ignore_merges finds it.
  const std::string vocab = R"("vocab":{"a":0,"b":1,"c":2,"ab":3,"abc":4},"merges":["a b"])";
  const fs::path plain = write_file(dir, "plain.json", tokenizer_json(R"({"type":"BPE",)" + vocab + "}"));
  const fs::path ignoring =
      write_file(dir, "ignoring.json", tokenizer_json(R"({"type":"BPE","ignore_merges":true,)" + vocab + "}"));
  EXPECT_EQ(Tokenizer::load(plain).encode("abc"), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(Tokenizer::load(ignoring).encode("abc"), std::vector<int32_t>{4});
}

TEST(TokenizerLoad, LiteralSplitPattern) {
  test::TempDir dir;
  const std::string model = R"({"type":"BPE","vocab":{"a":0,"b":1,"-":2,"a-":3},"merges":[["a","-"]]})";
  const std::string split_on_dash =
      R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":"-"},"behavior":"Isolated"},)"
      R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]})";
  const std::string no_split = R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":false})";
  EXPECT_EQ(Tokenizer::load(write_file(dir, "split.json", tokenizer_json(model, split_on_dash))).encode("a-b"),
            (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(Tokenizer::load(write_file(dir, "plain.json", tokenizer_json(model, no_split))).encode("a-b"),
            (std::vector<int32_t>{3, 1}));
}

TEST(TokenizerLoad, AddedTokenStripOptions) {
  test::TempDir dir;
  std::string json = tokenizer_json(R"({"type":"BPE","vocab":{"a":0,"Ġ":1,"w":4},"merges":[]})");
  json.replace(json.find(R"("added_tokens":[])"), 17,
               R"("added_tokens":[{"id":2,"content":"<m>","lstrip":true,"rstrip":true,"special":true},)"
               R"({"id":3,"content":"w","single_word":true}])");
  const Tokenizer tokenizer = Tokenizer::load(write_file(dir, "t.json", json));
  EXPECT_EQ(tokenizer.encode("a  <m>  a"), (std::vector<int32_t>{0, 2, 0}));
  EXPECT_EQ(tokenizer.encode("a w a"), (std::vector<int32_t>{0, 1, 3, 1, 0}));
  EXPECT_EQ(tokenizer.encode("aw"), (std::vector<int32_t>{0, 4}));  // inside a word: plain text
}

}  // namespace
}  // namespace dspark::tokenizer
