// Reading one streamed OpenAI response on the client side, in two layers:
//  - SseParser: the Server-Sent Events framing (WHATWG): lines end in \n, \r\n or \r; `data:`
//    lines (one optional space after the colon) accumulate, joined by \n; a blank line ends the
//    event; comments (`:...`) and the other fields (event, id, retry) are ignored. Bytes arrive in
//    whatever pieces the socket gives, so every state survives a split anywhere, even inside \r\n.
//  - StreamRecorder: the OpenAI chunk semantics over those events, timing one request's record
//    (http_serve_metrics.h): a chunk has content when choices[0].delta.content (chat),
//    .delta.reasoning_content (a thinking model's text) or choices[0].text (completions) is a
//    non-empty string; `usage` (stream_options.include_usage) gives the token counts; `[DONE]`
//    ends the stream; an `{"error": ...}` event fails the request (servers send one when
//    generation fails after streaming began).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "bench/http_serve_metrics.h"

namespace dspark::bench {

class SseParser {
 public:
  // The data of every event these bytes complete, in order.
  std::vector<std::string> feed(std::string_view bytes);

 private:
  void end_line(std::vector<std::string>& events);

  std::string line_;         // the current line, not yet terminated
  std::string data_;         // the current event's data lines, each followed by \n
  bool after_cr_ = false;    // the last byte was \r: a \n right after it ends no second line
};

class StreamRecorder {
 public:
  // One event's data, received t_s seconds after the request was sent.
  void on_event(std::string_view data, double t_s);
  // Fails the request (an HTTP error, a timeout, a dropped connection); the first reason is kept.
  void fail(std::string why);
  // The stream is over: [DONE] came or the request failed; further bytes can be dropped.
  bool done() const { return done_ || !record_.error.empty(); }
  // The record, once the stream has ended at t_s. Successful when it ended with [DONE] or a
  // finish_reason and no error; output tokens from usage, else the count of content chunks.
  RequestRecord finish(double t_s);

 private:
  void on_content(double t_s);

  RequestRecord record_;
  double last_event_s_ = -1;  // -1: no event yet
  bool done_ = false;             // [DONE] seen
  bool finish_reason_ = false;    // a choice carried a non-null finish_reason
};

}  // namespace dspark::bench
