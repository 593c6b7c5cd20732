#include "tokenizer/bpe_model.h"

#include <queue>

#include "common/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/string_index.h"

namespace dspark::tokenizer {
namespace {

// One symbol of a word being merged; symbols form a doubly linked list over a vector.
struct Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool alive;
};

// A possible merge of symbols[left] with its current right neighbour.
struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t result;
  // Lowest rank first; among equal ranks the leftmost pair, as Hugging Face does.
  bool operator>(const Candidate& other) const { return rank != other.rank ? rank > other.rank : left > other.left; }
};

using CandidateQueue = std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>>;

}  // namespace

BpeModel::BpeModel(const BpeSpec& spec, const std::string& origin) : ignore_merges_(spec.ignore_merges) {
  index_vocab(spec, origin);
  index_merges(spec, origin);
}

void BpeModel::index_vocab(const BpeSpec& spec, const std::string& origin) {
  byte_ids_.fill(-1);
  for (const auto& [token, id] : spec.vocab) {
    std::optional<std::string> bytes = alphabet_to_bytes(token);
    if (!bytes) continue;  // not a byte-level spelling: no word can produce it
    if (bytes->size() == 1) byte_ids_[static_cast<unsigned char>((*bytes)[0])] = id;
    if (ignore_merges_) id_of_bytes_.emplace(std::move(*bytes), id);
    if (spec.unk_token && token == *spec.unk_token) unk_id_ = id;
  }
  if (spec.unk_token && unk_id_ < 0) {
    throw Error(origin + ": unk_token '" + *spec.unk_token + "' is not in the vocabulary");
  }
}

void BpeModel::index_merges(const BpeSpec& spec, const std::string& origin) {
  const auto token_at = [&](int32_t index) { return std::string_view(spec.vocab[index].first); };
  StringIndex index_of_token(spec.vocab.size(), token_at);
  for (size_t i = 0; i < spec.vocab.size(); ++i) {
    index_of_token.insert_or_assign(spec.vocab[i].first, static_cast<int32_t>(i));
  }
  const auto id_of = [&](std::string_view token, size_t rank) {
    const std::optional<int32_t> index = index_of_token.find(token);
    if (!index) {
      throw Error(origin + ": merge #" + std::to_string(rank) + " uses '" + std::string(token) +
                  "', which is not in the vocabulary");
    }
    return spec.vocab[*index].second;
  };
  merges_ = MergeTable(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    joined.assign(left).append(right);
    merges_.insert(id_of(left, rank), id_of(right, rank), Merge{static_cast<int32_t>(rank), id_of(joined, rank)});
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    const auto it = id_of_bytes_.find(word);
    if (it != id_of_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() == 1 && byte_ids_[static_cast<unsigned char>(word[0])] >= 0) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  const uint64_t hash = BpeCache::hash_of(word);
  if (cache_->lookup(word, hash, out)) return;
  const size_t first = out.size();
  merge_word(word, out);
  cache_->store(word, hash, out.data() + first, out.size() - first);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (unsigned char byte : word) {
    const int32_t id = byte_ids_[byte] >= 0 ? byte_ids_[byte] : unk_id_;
    if (id < 0) continue;  // no token and no unk: Hugging Face drops the byte
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, index - 1, -1, true});
    if (index > 0) symbols[index - 1].next = index;
  }
  CandidateQueue queue;
  const auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    if (auto merge = merges_.find(symbols[left].id, symbols[symbols[left].next].id)) {
      queue.push(Candidate{merge->rank, left, merge->result});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    if (!left.alive || left.next < 0) continue;
    // Stale candidate: one of the two symbols has been merged into something else since.
    const auto current = merges_.find(left.id, symbols[left.next].id);
    if (!current || current->result != top.result) continue;
    Symbol& right = symbols[left.next];
    left.id = top.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    consider(left.prev);
    consider(top.left);
  }
  for (const Symbol& symbol : symbols) {
    if (symbol.alive) out.push_back(symbol.id);
  }
}

}  // namespace dspark::tokenizer
