#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace dspark::tokenizer {

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    const std::string& content = tokens_[i].content;
    if (!content.empty()) by_first_byte_[static_cast<unsigned char>(content[0])].push_back(i);
  }
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

std::vector<TextSegment> AddedVocabulary::split(std::string_view text) const {
  std::vector<TextSegment> segments;
  size_t done = 0;  // text[0, done) is covered by segments
  size_t search_from = 0;
  while (auto found = find_next(text, search_from)) {
    search_from = found->end;
    if (!allowed_as_word(*found->token, text, found->start, found->end)) continue;
    const Match match = widen_for_strip(*found, text, done);
    if (match.start > done) segments.push_back({done, match.start, std::nullopt});
    segments.push_back({match.start, match.end, match.token->id});
    done = search_from = match.end;
  }
  if (done < text.size()) segments.push_back({done, text.size(), std::nullopt});
  return segments;
}

std::optional<AddedVocabulary::Match> AddedVocabulary::find_next(std::string_view text, size_t from) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (by_first_byte_[static_cast<unsigned char>(text[pos])].empty()) continue;
    if (const AddedToken* token = longest_at(text, pos)) return Match{pos, pos + token->content.size(), token};
  }
  return std::nullopt;
}

const AddedToken* AddedVocabulary::longest_at(std::string_view text, size_t pos) const {
  const std::string_view rest = text.substr(pos);
  for (uint32_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    if (rest.starts_with(tokens_[index].content)) return &tokens_[index];
  }
  return nullptr;
}

// single_word tokens must not touch a word character on either side (Hugging Face semantics).
bool AddedVocabulary::allowed_as_word(const AddedToken& token, std::string_view text, size_t start, size_t end) const {
  if (!token.single_word) return true;
  if (start > 0) {
    size_t before = start;
    if (is_word_character(previous_code_point(text, before))) return false;
  }
  if (end < text.size()) {
    size_t after = end;
    if (is_word_character(next_code_point(text, after))) return false;
  }
  return true;
}

// lstrip/rstrip tokens take the neighbouring whitespace into their match, so it is not encoded.
AddedVocabulary::Match AddedVocabulary::widen_for_strip(const Match& match, std::string_view text, size_t floor) const {
  Match widened = match;
  if (match.token->lstrip) {
    while (widened.start > floor) {
      size_t before = widened.start;
      if (!is_white_space(previous_code_point(text, before))) break;
      widened.start = before;
    }
  }
  if (match.token->rstrip) {
    while (widened.end < text.size()) {
      size_t after = widened.end;
      if (!is_white_space(next_code_point(text, after))) break;
      widened.end = after;
    }
  }
  return widened;
}

}  // namespace dspark::tokenizer
