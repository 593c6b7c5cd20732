// Reading an OpenAI stream on the client side: the SSE framing survives any split of the bytes,
// and the recorder times content chunks and reads usage, [DONE] and error events as the
// definitions in http_serve_metrics.h say.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/http_stream.h"

namespace dspark::bench {
namespace {

// Every event of `bytes` fed in pieces of the given sizes (cycled).
std::vector<std::string> feed_in_pieces(const std::string& bytes, const std::vector<size_t>& sizes) {
  SseParser parser;
  std::vector<std::string> events;
  size_t at = 0;
  for (size_t k = 0; at < bytes.size(); ++k) {
    const size_t n = std::min(sizes[k % sizes.size()], bytes.size() - at);
    for (std::string& e : parser.feed(std::string_view(bytes).substr(at, n))) events.push_back(std::move(e));
    at += n;
  }
  return events;
}

// Three events in every line-ending style, a comment, an event/id field, a two-line data event
// and a `data:` without the space after the colon.
const std::string kStream =
    ": keep-alive comment\r\n"
    "data: {\"a\":1}\r\n\r\n"
    "event: message\nid: 7\ndata: first\ndata: second\n\n"
    "data:{\"b\":2}\r\r"
    "data: [DONE]\n\n";
const std::vector<std::string> kEvents = {"{\"a\":1}", "first\nsecond", "{\"b\":2}", "[DONE]"};

TEST(SseParser, ReadsEveryLineEndingAndJoinsDataLines) {
  EXPECT_EQ(feed_in_pieces(kStream, {kStream.size()}), kEvents);
}

// Byte by byte splits every \r\n and every "data:" prefix; the other piece sizes put the
// boundaries everywhere else.
TEST(SseParser, SameEventsWhateverTheChunkBoundaries) {
  for (const std::vector<size_t>& sizes : std::vector<std::vector<size_t>>{{1}, {2}, {3}, {5, 1}, {7, 2, 1}, {13}})
    EXPECT_EQ(feed_in_pieces(kStream, sizes), kEvents) << "first piece size " << sizes[0];
}

// An event is dispatched only by its blank line: a truncated stream leaves it pending.
TEST(SseParser, HoldsAnUnterminatedEvent) {
  SseParser parser;
  EXPECT_TRUE(parser.feed("data: {\"x\":1}\n").empty());
  EXPECT_TRUE(parser.feed("data: more").empty());
  EXPECT_EQ(parser.feed("\n\n"), std::vector<std::string>{"{\"x\":1}\nmore"});
}

std::string chat_chunk(const std::string& content) {
  return R"({"choices":[{"index":0,"delta":{"content":")" + content + R"("},"finish_reason":null}]})";
}

// Content at 0.1, 0.15 and 0.3 s (two of the three in one chunk each): TTFT 0.1, ITL 0.05 and
// 0.15; the role chunk and the empty-content chunk do not count; tokens from usage (5, more than
// the 3 chunks, as a speculative server sends several tokens per chunk).
TEST(StreamRecorder, TimesContentChunksAndTakesTokensFromUsage) {
  StreamRecorder rec;
  rec.on_event(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})", 0.05);
  rec.on_event(chat_chunk("Hel"), 0.1);
  rec.on_event(chat_chunk("lo"), 0.15);
  rec.on_event(R"({"choices":[{"index":0,"delta":{},"finish_reason":null}]})", 0.2);
  rec.on_event(chat_chunk(" you"), 0.3);
  rec.on_event(R"({"choices":[{"index":0,"delta":{},"finish_reason":"length"}]})", 0.31);
  rec.on_event(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}})", 0.32);
  rec.on_event("[DONE]", 0.33);
  EXPECT_TRUE(rec.done());
  const RequestRecord r = rec.finish(0.4);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.content_chunks, 3);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.1);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.05, 1e-12);
  EXPECT_NEAR(r.itl_s[1], 0.15, 1e-12);
  EXPECT_DOUBLE_EQ(r.last_token_s, 0.3);
  EXPECT_DOUBLE_EQ(r.e2el_s, 0.33);  // the last event, not when the connection closed
  EXPECT_EQ(r.output_tokens, 5);
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_TRUE(r.usage_reported);
}

// Completions stream `text`, not `delta`; without usage the chunks are the token count; a
// finish_reason without [DONE] still ends the stream well (some servers close without it).
TEST(StreamRecorder, CompletionsWithoutUsageCountChunks) {
  StreamRecorder rec;
  rec.on_event(R"({"choices":[{"index":0,"text":"a","finish_reason":null}]})", 1.0);
  rec.on_event(R"({"choices":[{"index":0,"text":"b","finish_reason":"stop"}]})", 2.0);
  const RequestRecord r = rec.finish(2.5);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_FALSE(r.usage_reported);
  EXPECT_DOUBLE_EQ(r.ttft_s, 1.0);
}

// A thinking model's reasoning text is content for TTFT.
TEST(StreamRecorder, ReasoningContentCounts) {
  StreamRecorder rec;
  rec.on_event(R"({"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]})", 0.2);
  EXPECT_EQ(rec.finish(0.3).content_chunks, 1);
}

TEST(StreamRecorder, ErrorEventFailsTheRequestAndStopsReading) {
  StreamRecorder rec;
  rec.on_event(chat_chunk("x"), 0.1);
  rec.on_event(R"({"error":{"message":"engine died","type":"server_error"}})", 0.2);
  EXPECT_TRUE(rec.done());
  rec.on_event(chat_chunk("y"), 0.3);  // ignored: the stream is over
  const RequestRecord r = rec.finish(0.4);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("engine died"), std::string::npos) << r.error;
  EXPECT_EQ(r.content_chunks, 1);
}

TEST(StreamRecorder, StreamCutShortFails) {
  StreamRecorder rec;
  rec.on_event(chat_chunk("x"), 0.1);
  const RequestRecord r = rec.finish(0.2);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("[DONE]"), std::string::npos) << r.error;
}

TEST(StreamRecorder, NonJsonEventFails) {
  StreamRecorder rec;
  rec.on_event("<html>oops</html>", 0.1);
  const RequestRecord r = rec.finish(0.2);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("<html>"), std::string::npos) << r.error;
}

// The first failure reason is the one kept (a timeout after an HTTP error says less).
TEST(StreamRecorder, KeepsTheFirstFailure) {
  StreamRecorder rec;
  rec.fail("HTTP 503: busy");
  rec.fail("timed out");
  EXPECT_EQ(rec.finish(1.0).error, "HTTP 503: busy");
}

}  // namespace
}  // namespace dspark::bench
