// The byte-level BPE model: turns one pre-tokenised word (raw bytes) into token ids by applying
// the ranked merges of tokenizer.json, lowest rank first and leftmost first among equal ranks.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/bpe_cache.h"
#include "tokenizer/merge_table.h"
#include "tokenizer/string_index.h"

namespace dspark::tokenizer {

struct BpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;       // byte-level token string -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  bool ignore_merges = false;  // a word that is itself in the vocabulary maps to that token
  std::optional<std::string> unk_token;
};

class BpeModel {
 public:
  BpeModel() = default;
  // Throws dspark::Error naming `origin` for a merge whose tokens are not in the vocabulary.
  BpeModel(const BpeSpec& spec, const std::string& origin);

  // Appends the ids of `word` (raw bytes) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void index_vocab(const BpeSpec& spec, const std::string& origin);
  void index_merges(const BpeSpec& spec, const std::string& origin);

  std::array<int32_t, 256> byte_ids_{};  // id of each single-byte token, -1 if absent
  int32_t unk_id_ = -1;                  // stands for bytes without a token; -1: they are dropped
  MergeTable merges_;
  // whole words by their bytes, only for ignore_merges
  std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>> id_of_bytes_;
  bool ignore_merges_ = false;
  std::unique_ptr<BpeCache> cache_ = std::make_unique<BpeCache>();
};

}  // namespace dspark::tokenizer
