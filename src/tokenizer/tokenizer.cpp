#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "common/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_gguf.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode.h"

namespace dspark::tokenizer {
namespace {

std::filesystem::path resolve_tokenizer_json(const std::filesystem::path& path) {
  if (std::filesystem::is_directory(path)) {
    const std::filesystem::path file = path / "tokenizer.json";
    if (!std::filesystem::exists(file)) throw Error(path.string() + ": directory has no tokenizer.json");
    return file;
  }
  if (!std::filesystem::exists(path)) throw Error(path.string() + ": no such tokenizer file or directory");
  return path;
}

int32_t max_id(const TokenizerSpec& spec) {
  int32_t max = -1;
  for (const auto& [token, id] : spec.bpe.vocab) max = std::max(max, id);
  for (const AddedToken& token : spec.added_tokens) max = std::max(max, token.id);
  return max;
}

}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  if (model::is_gguf_path(path.string())) {
    const model::GgufFile file = model::GgufFile::open(path.string());
    return Tokenizer(read_gguf_tokenizer(file), path, read_gguf_tokenizer_config(file));
  }
  const std::filesystem::path json_file = resolve_tokenizer_json(path);
  return Tokenizer(read_tokenizer_json(json_file), json_file,
                   TokenizerConfig::load_from_directory(json_file.parent_path()));
}

Tokenizer::Tokenizer(TokenizerSpec spec, std::filesystem::path json_path, TokenizerConfig config)
    : json_path_(std::move(json_path)),
      config_(std::move(config)),
      nfc_(spec.nfc),
      added_(spec.added_tokens),
      bpe_(spec.bpe, json_path_.string()) {
  for (const SplitSpec& split : spec.splits) pre_tokenizer_.add_isolated_split(Regex(split.pattern, split.literal));
  index_tokens(spec);
}

void Tokenizer::index_tokens(TokenizerSpec& spec) {
  tokens_.resize(static_cast<size_t>(max_id(spec) + 1));
  for (auto& [spelling, id] : spec.bpe.vocab) {
    std::string bytes = token_bytes_for_decoding(spelling);
    tokens_[id] = TokenEntry{std::move(spelling), std::move(bytes), TokenKind::kModel};
  }
  // Added tokens may repeat a vocabulary entry (GPT-2's <|endoftext|>); the added meaning wins.
  for (const AddedToken& token : spec.added_tokens) {
    tokens_[token.id] =
        TokenEntry{token.content, token.content, token.special ? TokenKind::kSpecial : TokenKind::kAdded};
  }
  id_of_spelling_ = StringIndex<SpellingOf>(tokens_.size(), SpellingOf{tokens_.data()});
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (tokens_[id].kind == TokenKind::kModel) id_of_spelling_.insert_or_assign(tokens_[id].spelling, id);
  }
  for (const AddedToken& token : spec.added_tokens) id_of_spelling_.insert_or_assign(token.content, token.id);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (const auto bad = find_invalid_utf8(text)) {
    throw Error("cannot tokenize: text is not valid UTF-8 at byte " + std::to_string(*bad));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  for (const TextSegment& segment : added_.split(text)) {
    if (segment.added_id) {
      ids.push_back(*segment.added_id);
    } else {
      encode_plain_text(text.substr(segment.start, segment.end - segment.start), ids);
    }
  }
  return ids;
}

void Tokenizer::encode_plain_text(std::string_view text, std::vector<int32_t>& ids) const {
  std::string normalized;
  if (nfc_ && may_change_under_nfc(text)) {
    normalized = nfc(text);
    text = normalized;
  }
  pre_tokenizer_.for_each_word(text, [&](std::string_view word) { bpe_.encode_word(word, ids); });
}

// Runs of byte-level tokens are joined before UTF-8 decoding, since characters straddle tokens;
// added tokens are literal text between such runs (the JavaScript reference decoder's rule).
std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string text;
  std::string run;  // bytes of the current run of byte-level tokens
  for (const int32_t id : ids) {
    const TokenEntry& token = entry(id);
    if (token.kind == TokenKind::kModel) {
      run += token.bytes;
    } else if (!(skip_special_tokens && token.kind == TokenKind::kSpecial)) {
      text += utf8_lossy(run);
      run.clear();
      text += token.bytes;
    }
  }
  text += utf8_lossy(run);
  return text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return id_of_spelling_.find(token); }

const std::string& Tokenizer::id_to_token(int32_t id) const { return entry(id).spelling; }

const std::string& Tokenizer::token_bytes(int32_t id) const { return entry(id).bytes; }

bool Tokenizer::is_added(int32_t id) const {
  const TokenKind kind = entry(id).kind;
  return kind == TokenKind::kAdded || kind == TokenKind::kSpecial;
}

bool Tokenizer::is_special(int32_t id) const { return entry(id).kind == TokenKind::kSpecial; }

const Tokenizer::TokenEntry& Tokenizer::entry(int32_t id) const {
  if (!has_id(id)) {
    throw Error("token id " + std::to_string(id) + " is not in the vocabulary of " + json_path_.string() + " (size " +
                std::to_string(vocab_size()) + ")");
  }
  return tokens_[id];
}

std::optional<int32_t> Tokenizer::id_of_declared(const std::optional<std::string>& token) const {
  return token ? token_to_id(*token) : std::nullopt;
}

}  // namespace dspark::tokenizer
