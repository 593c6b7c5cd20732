#include "tokenizer/tokenizer_json_sax.h"

#include <cstdint>

#include "common/error.h"

namespace dspark::tokenizer {

void TokenizerJsonSax::fail(const std::string& problem) const { throw Error(origin_ + ": " + problem); }

// True when the next value is the member `name` of the top-level "model" object.
bool TokenizerJsonSax::at_model_member(const char* name) const {
  return frames_.size() == 2 && frames_[0].is_object && frames_[0].key == "model" && frames_[1].is_object &&
         frames_[1].key == name;
}

void TokenizerJsonSax::add_vocab_entry(int64_t id) {
  if (capture_depth_ != 1 || id < 0 || id > INT32_MAX) fail("vocab entry '" + pending_key_ + "' has an invalid id");
  bpe_.vocab.emplace_back(std::move(pending_key_), static_cast<int32_t>(id));
}

// A merge written as one string: "left right".
void TokenizerJsonSax::add_merge_string(const std::string& text) {
  const size_t space = text.find(' ');
  if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
    fail("merge #" + std::to_string(bpe_.merges.size()) + " is neither \"a b\" nor [\"a\", \"b\"]");
  }
  bpe_.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
}

void TokenizerJsonSax::end_merge_pair() {
  if (pair_.size() != 2) fail("merge #" + std::to_string(bpe_.merges.size()) + " is not a pair of strings");
  bpe_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
  pair_.clear();
}

bool TokenizerJsonSax::null() {
  if (mode_ != Mode::kDom) fail("unexpected null in model.vocab or model.merges");
  return dom_.null();
}

bool TokenizerJsonSax::boolean(bool value) {
  if (mode_ != Mode::kDom) fail("unexpected boolean in model.vocab or model.merges");
  return dom_.boolean(value);
}

bool TokenizerJsonSax::number_integer(json::number_integer_t value) {
  if (mode_ == Mode::kVocab) {
    add_vocab_entry(value);
    return true;
  }
  if (mode_ == Mode::kMerges) fail("unexpected number in model.merges");
  return dom_.number_integer(value);
}

bool TokenizerJsonSax::number_unsigned(json::number_unsigned_t value) {
  if (mode_ == Mode::kVocab) {
    add_vocab_entry(value > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(value));
    return true;
  }
  if (mode_ == Mode::kMerges) fail("unexpected number in model.merges");
  return dom_.number_unsigned(value);
}

bool TokenizerJsonSax::number_float(json::number_float_t value, const json::string_t& text) {
  if (mode_ != Mode::kDom) fail("unexpected number '" + text + "' in model.vocab or model.merges");
  return dom_.number_float(value, text);
}

bool TokenizerJsonSax::string(json::string_t& value) {
  if (mode_ == Mode::kVocab) fail("vocab entry '" + pending_key_ + "' has an invalid id");
  if (mode_ == Mode::kMerges) {
    if (capture_depth_ == 1) {
      add_merge_string(value);
    } else {
      pair_.push_back(std::move(value));
    }
    return true;
  }
  return dom_.string(value);
}

bool TokenizerJsonSax::binary(json::binary_t& value) { return dom_.binary(value); }

bool TokenizerJsonSax::start_object(std::size_t size) {
  if (mode_ != Mode::kDom) fail("unexpected object in model.vocab or model.merges");
  if (at_model_member("vocab")) {
    mode_ = Mode::kVocab;
    capture_depth_ = 1;
    vocab_seen_ = true;
    return dom_.null();  // placeholder for the captured member
  }
  frames_.push_back(Frame{true, {}});
  return dom_.start_object(size);
}

bool TokenizerJsonSax::key(json::string_t& value) {
  if (mode_ == Mode::kVocab) {
    pending_key_ = std::move(value);
    return true;
  }
  frames_.back().key = value;
  return dom_.key(value);
}

bool TokenizerJsonSax::end_object() {
  if (mode_ == Mode::kVocab) {
    mode_ = Mode::kDom;
    capture_depth_ = 0;
    return true;
  }
  frames_.pop_back();
  return dom_.end_object();
}

bool TokenizerJsonSax::start_array(std::size_t size) {
  if (mode_ == Mode::kVocab) fail("vocab entry '" + pending_key_ + "' has an invalid id");
  if (mode_ == Mode::kMerges) {
    if (capture_depth_ != 1) fail("merge #" + std::to_string(bpe_.merges.size()) + " is not a pair of strings");
    ++capture_depth_;
    return true;
  }
  if (at_model_member("merges")) {
    mode_ = Mode::kMerges;
    capture_depth_ = 1;
    merges_seen_ = true;
    return dom_.null();
  }
  frames_.push_back(Frame{false, {}});
  return dom_.start_array(size);
}

bool TokenizerJsonSax::end_array() {
  if (mode_ == Mode::kMerges) {
    if (--capture_depth_ == 1) {
      end_merge_pair();
    } else {
      mode_ = Mode::kDom;
    }
    return true;
  }
  frames_.pop_back();
  return dom_.end_array();
}

bool TokenizerJsonSax::parse_error(std::size_t position, const std::string& token,
                                   const nlohmann::detail::exception& error) {
  (void)token;
  fail("not valid JSON at byte " + std::to_string(position) + " (" + error.what() + ")");
}

}  // namespace dspark::tokenizer
