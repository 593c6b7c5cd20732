// The text of one streamed choice, released as deltas that are never taken back: complete UTF-8
// characters only, and nothing that might turn out to be the start of a stop string (the engine
// cuts the final text before the first stop string, and the stream must end with exactly that
// text). Concatenated, the deltas equal the non-streamed text of the same request.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace dspark::serve {

class TextStream {
 public:
  TextStream(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  // Appends committed tokens; returns the text that is now safe to send (possibly empty).
  std::string push(std::span<const int64_t> ids);
  // The rest, given the request's final text (RequestOutcome::text); the deltas so far are a
  // prefix of it.
  std::string finish(const std::string& final_text);

 private:
  const tokenizer::Tokenizer& tokenizer_;
  tokenizer::StreamDecoder decoder_;
  std::vector<std::string> stop_strings_;
  std::string text_;  // decoded so far (complete characters)
  size_t sent_ = 0;   // bytes of text_ already released
};

}  // namespace dspark::serve
