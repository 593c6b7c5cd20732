#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "common/error.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/string_index.h"
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

enum class TokenKind : uint8_t { kMissing, kModel, kAdded, kSpecial };

struct TokenEntry {
  std::string spelling;  // as in tokenizer.json
  std::string bytes;     // what it decodes to
  TokenKind kind = TokenKind::kMissing;
};

// Reads a spelling back from the token table for the spelling index. Holds the vector's buffer,
// which stays put (the table is never resized after construction, and Impl never moves).
struct SpellingOf {
  const TokenEntry* tokens = nullptr;
  std::string_view operator()(int32_t id) const { return tokens[id].spelling; }
};

}  // namespace

struct Tokenizer::Impl {
  Impl(TokenizerSpec& spec, std::filesystem::path json_path, TokenizerConfig config);
  Impl(const Impl&) = delete;
  const TokenEntry& entry(int32_t id) const;
  void encode_plain_text(std::string_view text, std::vector<int32_t>& ids) const;

  std::filesystem::path json_path;
  TokenizerConfig config;
  bool nfc = false;
  PreTokenizer pre_tokenizer;
  AddedVocabulary added;
  BpeModel bpe;
  std::vector<TokenEntry> tokens;  // by id
  StringIndex<SpellingOf> id_of_spelling;
};

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
    : impl_(std::make_shared<const Impl>(spec, std::move(json_path), std::move(config))) {}

Tokenizer::Impl::Impl(TokenizerSpec& spec, std::filesystem::path json_path_in, TokenizerConfig config_in)
    : json_path(std::move(json_path_in)),
      config(std::move(config_in)),
      nfc(spec.nfc),
      added(spec.added_tokens),
      bpe(spec.bpe, json_path.string()) {
  for (const SplitSpec& split : spec.splits) pre_tokenizer.add_isolated_split(Regex(split.pattern, split.literal));
  tokens.resize(static_cast<size_t>(max_id(spec) + 1));
  for (auto& [spelling, id] : spec.bpe.vocab) {
    std::string bytes = token_bytes_for_decoding(spelling);
    tokens[id] = TokenEntry{std::move(spelling), std::move(bytes), TokenKind::kModel};
  }
  // Added tokens may repeat a vocabulary entry (GPT-2's <|endoftext|>); the added meaning wins.
  for (const AddedToken& token : spec.added_tokens) {
    tokens[token.id] =
        TokenEntry{token.content, token.content, token.special ? TokenKind::kSpecial : TokenKind::kAdded};
  }
  id_of_spelling = StringIndex<SpellingOf>(tokens.size(), SpellingOf{tokens.data()});
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].kind == TokenKind::kModel) id_of_spelling.insert_or_assign(tokens[id].spelling, id);
  }
  for (const AddedToken& token : spec.added_tokens) id_of_spelling.insert_or_assign(token.content, token.id);
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->tokens.size()); }

bool Tokenizer::has_id(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->tokens[id].kind != TokenKind::kMissing;
}

const TokenizerConfig& Tokenizer::config() const { return impl_->config; }
const std::filesystem::path& Tokenizer::json_path() const { return impl_->json_path; }

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (const auto bad = find_invalid_utf8(text)) {
    throw Error("cannot tokenize: text is not valid UTF-8 at byte " + std::to_string(*bad));
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  for (const TextSegment& segment : impl_->added.split(text)) {
    if (segment.added_id) {
      ids.push_back(*segment.added_id);
    } else {
      impl_->encode_plain_text(text.substr(segment.start, segment.end - segment.start), ids);
    }
  }
  return ids;
}

void Tokenizer::Impl::encode_plain_text(std::string_view text, std::vector<int32_t>& ids) const {
  std::string normalized;
  if (nfc && may_change_under_nfc(text)) {
    normalized = tokenizer::nfc(text);
    text = normalized;
  }
  pre_tokenizer.for_each_word(text, [&](std::string_view word) { bpe.encode_word(word, ids); });
}

// Runs of byte-level tokens are joined before UTF-8 decoding, since characters straddle tokens;
// added tokens are literal text between such runs (the JavaScript reference decoder's rule).
std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string text;
  std::string run;  // bytes of the current run of byte-level tokens
  for (const int32_t id : ids) {
    const TokenEntry& token = impl_->entry(id);
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

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->id_of_spelling.find(token); }

const std::string& Tokenizer::id_to_token(int32_t id) const { return impl_->entry(id).spelling; }

const std::string& Tokenizer::token_bytes(int32_t id) const { return impl_->entry(id).bytes; }

bool Tokenizer::is_added(int32_t id) const {
  const TokenKind kind = impl_->entry(id).kind;
  return kind == TokenKind::kAdded || kind == TokenKind::kSpecial;
}

bool Tokenizer::is_special(int32_t id) const { return impl_->entry(id).kind == TokenKind::kSpecial; }

const TokenEntry& Tokenizer::Impl::entry(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(tokens.size()) || tokens[id].kind == TokenKind::kMissing) {
    throw Error("token id " + std::to_string(id) + " is not in the vocabulary of " + json_path.string() + " (size " +
                std::to_string(tokens.size()) + ")");
  }
  return tokens[id];
}

std::optional<int32_t> Tokenizer::id_of_declared(const std::optional<std::string>& token) const {
  return token ? token_to_id(*token) : std::nullopt;
}

}  // namespace dspark::tokenizer
