// Incremental decoding for streaming generation: tokens arrive one at a time and a UTF-8 character
// may be split across several byte-level tokens, so only complete characters are released.
// The concatenation of everything push() and flush() return equals Tokenizer::decode of all ids.
#pragma once
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace dspark::tokenizer {

class StreamDecoder {
 public:
  // `tokenizer` may be null for a decoder that is never pushed to (a run without a tokenizer).
  explicit StreamDecoder(const Tokenizer* tokenizer, bool skip_special_tokens = false)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : StreamDecoder(&tokenizer, skip_special_tokens) {}

  // The text that `id` completes (possibly empty). Throws dspark::Error for an unknown id.
  std::string push(int32_t id);

  // The held-back bytes of an unfinished character, as U+FFFD; call at end of stream.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // bytes of an unfinished character
};

}  // namespace dspark::tokenizer
