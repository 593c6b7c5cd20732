// Pre-tokenisation: regex splits (Split with behavior Isolated, and ByteLevel's own GPT-2 regex)
// that cut normalised text into the words the BPE model encodes one at a time.
#pragma once
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace dspark::tokenizer {

class PreTokenizer {
 public:
  // Adds a split stage. Each stage cuts every piece of the previous one; matches and the text
  // between them both become pieces ("Isolated").
  void add_isolated_split(Regex regex) { stages_.push_back(std::move(regex)); }

  // Calls on_word(std::string_view) for each piece of `text` (valid UTF-8), left to right. Pieces
  // are handed over as they are found, so long texts need no intermediate lists.
  template <typename OnWord>
  void for_each_word(std::string_view text, OnWord&& on_word) const {
    if (!text.empty()) split_from(0, text, on_word);
  }

 private:
  template <typename OnWord>
  void split_from(size_t stage, std::string_view piece, OnWord& on_word) const {
    if (stage == stages_.size()) {
      on_word(piece);
      return;
    }
    Regex::Cursor cursor(stages_[stage], piece);
    size_t done = 0;
    while (const auto match = cursor.next()) {
      const auto [start, end] = *match;
      if (start > done) split_from(stage + 1, piece.substr(done, start - done), on_word);
      split_from(stage + 1, piece.substr(start, end - start), on_word);
      done = end;
    }
    if (done < piece.size()) split_from(stage + 1, piece.substr(done), on_word);
  }

  std::vector<Regex> stages_;
};

}  // namespace dspark::tokenizer
