#include "serve/text_stream.h"

#include <algorithm>
#include <climits>

#include "common/error.h"

namespace dspark::serve {

TextStream::TextStream(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : tokenizer_(tokenizer), decoder_(tokenizer), stop_strings_(std::move(stop_strings)) {}

std::string TextStream::push(std::span<const int64_t> ids) {
  for (int64_t id : ids)  // ids past the tokenizer's vocabulary (padded embeddings) have no text
    if (id <= INT32_MAX && tokenizer_.has_id(static_cast<int32_t>(id))) text_ += decoder_.push(static_cast<int32_t>(id));
  size_t safe = text_.size();
  for (const std::string& stop : stop_strings_) {
    if (const size_t at = text_.find(stop); at != std::string::npos) safe = std::min(safe, at);
    // Hold back the longest tail of the text that is a proper prefix of the stop string.
    for (size_t k = std::min(stop.size() - 1, text_.size()); k > 0; --k)
      if (text_.compare(text_.size() - k, k, stop, 0, k) == 0) {
        safe = std::min(safe, text_.size() - k);
        break;
      }
  }
  if (safe <= sent_) return "";
  std::string delta = text_.substr(sent_, safe - sent_);
  sent_ = safe;
  return delta;
}

std::string TextStream::finish(const std::string& final_text) {
  // The engine's text and ours decode the same ids; a mismatch would be a bug in one of them, and
  // ends this stream with an error event rather than the server.
  if (final_text.compare(0, sent_, text_, 0, sent_) != 0)
    throw Error("internal: the streamed text is not a prefix of the request's final text");
  return final_text.substr(std::min(sent_, final_text.size()));
}

}  // namespace dspark::serve
