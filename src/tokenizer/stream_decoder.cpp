#include "tokenizer/stream_decoder.h"

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace dspark::tokenizer {

std::string StreamDecoder::push(int32_t id) {
  DSPARK_ASSERT(tokenizer_ != nullptr);
  const std::string& bytes = tokenizer_->token_bytes(id);
  if (!tokenizer_->is_added(id)) {
    pending_ += bytes;
    const size_t complete = complete_utf8_prefix(pending_);
    std::string text = utf8_lossy(std::string_view(pending_).substr(0, complete));
    pending_.erase(0, complete);
    return text;
  }
  if (skip_special_tokens_ && tokenizer_->is_special(id)) return {};
  // An added token ends the byte run, as in Tokenizer::decode.
  std::string text = flush();
  text += bytes;
  return text;
}

std::string StreamDecoder::flush() {
  std::string text = utf8_lossy(pending_);
  pending_.clear();
  return text;
}

}  // namespace dspark::tokenizer
