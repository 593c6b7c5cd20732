// Added tokens (special and not) from tokenizer.json. They are found in the raw input text before
// normalisation and pre-tokenisation and always encode to their own id.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dspark::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;       // the literal text the token stands for
  bool special = false;      // dropped by decode(..., skip_special_tokens = true)
  bool lstrip = false;       // also swallows the whitespace before it
  bool rstrip = false;       // also swallows the whitespace after it
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // recorded only: all added tokens are matched in the raw text, as the
                             // reference JavaScript tokenizer does
};

// A stretch of input text: either one added token or plain text for the BPE pipeline.
struct TextSegment {
  size_t start = 0;
  size_t end = 0;
  std::optional<int32_t> added_id;  // set when the segment is an added token
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // Cuts `text` (valid UTF-8) into added-token matches and the plain text between them. At each
  // position the leftmost match wins, and among those the longest content.
  std::vector<TextSegment> split(std::string_view text) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Match {
    size_t start, end;
    const AddedToken* token;
  };
  std::optional<Match> find_next(std::string_view text, size_t from) const;
  const AddedToken* longest_at(std::string_view text, size_t pos) const;
  bool allowed_as_word(const AddedToken& token, std::string_view text, size_t start, size_t end) const;
  Match widen_for_strip(const Match& match, std::string_view text, size_t floor) const;

  std::vector<AddedToken> tokens_;
  // Indices into tokens_ of the tokens starting with each byte, longest content first.
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace dspark::tokenizer
