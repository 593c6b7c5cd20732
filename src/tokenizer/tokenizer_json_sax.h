// Streaming reader for tokenizer.json. The BPE vocabulary and merges (hundreds of thousands of
// entries) go straight into a BpeSpec; building them as a nlohmann DOM first would triple the load
// time. Everything else still becomes a small DOM, which tokenizer_json.cpp interprets.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/bpe_model.h"

namespace dspark::tokenizer {

class TokenizerJsonSax {
 public:
  using json = nlohmann::json;

  // `rest` receives the document with model.vocab and model.merges replaced by null.
  TokenizerJsonSax(std::string origin, json& rest, BpeSpec& bpe) : origin_(std::move(origin)), dom_(rest), bpe_(bpe) {}

  bool vocab_seen() const { return vocab_seen_; }
  bool merges_seen() const { return merges_seen_; }

  // nlohmann SAX interface
  bool null();
  bool boolean(bool value);
  bool number_integer(json::number_integer_t value);
  bool number_unsigned(json::number_unsigned_t value);
  bool number_float(json::number_float_t value, const json::string_t& text);
  bool string(json::string_t& value);
  bool binary(json::binary_t& value);
  bool start_object(std::size_t size);
  bool key(json::string_t& value);
  bool end_object();
  bool start_array(std::size_t size);
  bool end_array();
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& error);

 private:
  enum class Mode { kDom, kVocab, kMerges };
  struct Frame {
    bool is_object;
    std::string key;  // the member being read, for objects
  };

  bool at_model_member(const char* name) const;
  void add_vocab_entry(int64_t id);
  void add_merge_string(const std::string& text);
  void end_merge_pair();
  [[noreturn]] void fail(const std::string& problem) const;

  std::string origin_;
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  BpeSpec& bpe_;
  std::vector<Frame> frames_;  // open containers of the DOM part
  Mode mode_ = Mode::kDom;
  int capture_depth_ = 0;  // nesting inside the vocab object / merges array being captured
  std::string pending_key_;
  std::vector<std::string> pair_;  // parts of a ["a", "b"] merge
  bool vocab_seen_ = false;
  bool merges_seen_ = false;
};

}  // namespace dspark::tokenizer
