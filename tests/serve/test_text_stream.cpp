// TextStream: streamed deltas are never taken back, hold back what may start a stop string, and
// end with exactly the engine's final text (decoded, cut before the first stop string).
#include <gtest/gtest.h>

#include "common/error.h"
#include "serve/text_stream.h"

namespace dspark::serve {
namespace {

const tokenizer::Tokenizer& tok() {
  static const tokenizer::Tokenizer t = tokenizer::Tokenizer::load(std::string(DSPARK_SOURCE_DIR) + "/models/tiny-target-8l");
  return t;
}

std::vector<int64_t> ids_of(const std::string& text) {
  const std::vector<int32_t> ids = tok().encode(text);
  return {ids.begin(), ids.end()};
}

// What the engine reports as the final text: the decoded ids, cut before the first stop string.
std::string engine_text(const std::vector<int64_t>& ids, const std::vector<std::string>& stops) {
  const std::string text = tok().decode(std::vector<int32_t>(ids.begin(), ids.end()));
  size_t cut = text.size();
  for (const std::string& s : stops) cut = std::min(cut, text.find(s));
  return text.substr(0, cut);
}

// Streams `ids` token by token; returns the deltas (the last one from finish()).
std::vector<std::string> stream(const std::vector<int64_t>& ids, const std::vector<std::string>& stops) {
  TextStream s(tok(), stops);
  std::vector<std::string> deltas;
  for (int64_t id : ids) deltas.push_back(s.push(std::vector<int64_t>{id}));
  deltas.push_back(s.finish(engine_text(ids, stops)));
  return deltas;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += p;
  return out;
}

TEST(TextStream, DeltasJoinToTheFinalText) {
  for (const std::string text : {"Hello, world! How are you today?", "naïve café — ünïcödé ✓ 日本語のテキスト 🎉🎉",
                                 "line one\n\nline two\n"}) {
    const std::vector<int64_t> ids = ids_of(text);
    EXPECT_EQ(joined(stream(ids, {})), text);
    for (const std::string& d : stream(ids, {})) EXPECT_NO_THROW(tok().encode(d)) << "a delta is not valid UTF-8";
  }
}

TEST(TextStream, StopsBeforeTheStopStringAndNeverSendsItsStart) {
  const std::string text = "The answer is 42. END of story, more text";
  const std::vector<int64_t> ids = ids_of(text);
  const std::vector<std::string> deltas = stream(ids, {"END"});
  EXPECT_EQ(joined(deltas), "The answer is 42. ");
  // Nothing sent before the end contained a piece of "END" past the cut.
  std::string so_far;
  for (size_t i = 0; i + 1 < deltas.size(); ++i) {
    so_far += deltas[i];
    EXPECT_EQ(text.compare(0, so_far.size(), so_far), 0);
    EXPECT_LE(so_far.size(), std::string("The answer is 42. ").size());
  }
}

TEST(TextStream, HoldsBackAPossibleStopPrefixThenReleasesIt) {
  // "EN" could begin "END"; once "ENOUGH" shows it does not, it is released.
  const std::string text = "say ENOUGH now";
  const std::vector<int64_t> ids = ids_of(text);
  EXPECT_EQ(joined(stream(ids, {"END"})), text);
  TextStream s(tok(), {"now"});
  std::string sent;
  for (int64_t id : ids) sent += s.push(std::vector<int64_t>{id});
  EXPECT_EQ(sent, "say ENOUGH ");  // "now" itself is never sent
}

TEST(TextStream, FinishRefusesAFinalTextThatContradictsWhatWasSent) {
  TextStream s(tok(), {});
  EXPECT_EQ(s.push(ids_of("abc def")), "abc def");
  EXPECT_THROW(s.finish("xyz"), Error);
}

}  // namespace
}  // namespace dspark::serve
