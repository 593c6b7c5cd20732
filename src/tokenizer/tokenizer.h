// Hugging Face tokenizer.json byte-level BPE tokenizer (Qwen2/Qwen3, Llama-3, GPT-2 family).
//
// encode: added tokens are found in the raw text first; the text between them is NFC-normalised
// (if the tokenizer says so), split by the pre-tokenizer regexes and each piece is BPE-encoded
// from its raw bytes. No BOS/EOS is added. decode: the reverse, byte-level tokens become bytes and
// added tokens their literal content. Where the Rust and JavaScript Hugging Face implementations
// differ in corner cases we follow the JavaScript one, which produced our reference fixtures
// (see regex.h for the regex dialect).
//
// A Tokenizer is immutable after load apart from its internal, thread-safe word cache, so one
// instance may encode from several threads.
//
// The BPE machinery (pre-tokenizer, added vocabulary, merges, word cache) lives behind a pointer in
// tokenizer.cpp, so editing those internal headers rebuilds the tokenizer, not its users.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_config.h"

namespace dspark::tokenizer {

struct TokenizerSpec;

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding one. tokenizer_config.json (and
  // chat_template.jinja) beside it are read when present. A .gguf file: the tokenizer in its
  // metadata (tokenizer_gguf.h). Throws dspark::Error naming the file.
  static Tokenizer load(const std::filesystem::path& path);

  // Token ids of `text` (UTF-8; invalid UTF-8 is a dspark::Error naming the byte offset).
  std::vector<int32_t> encode(std::string_view text) const;

  // Text of `ids`; invalid UTF-8 from partial byte tokens becomes U+FFFD. An id that is not in the
  // vocabulary is a dspark::Error naming it.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Max id + 1 over the vocabulary and the added tokens.
  int32_t vocab_size() const;

  // Id of a token as spelled in tokenizer.json ("Ġthe" for " the", or an added token's content).
  std::optional<int32_t> token_to_id(std::string_view token) const;

  // Spelling of `id` in tokenizer.json; throws dspark::Error for an unknown id.
  const std::string& id_to_token(int32_t id) const;

  // The bytes `id` contributes to decoded text (may be part of a UTF-8 character); throws for an
  // unknown id.
  const std::string& token_bytes(int32_t id) const;

  // True when `id` names a token (ids past the vocabulary, as in padded embeddings, do not).
  bool has_id(int32_t id) const;

  bool is_added(int32_t id) const;    // an added token (decoded as its literal content)
  bool is_special(int32_t id) const;  // an added token marked special

  const TokenizerConfig& config() const;
  const std::filesystem::path& json_path() const;

  // Ids of the tokens declared in tokenizer_config.json, when declared and known.
  std::optional<int32_t> bos_id() const { return id_of_declared(config().bos_token); }
  std::optional<int32_t> eos_id() const { return id_of_declared(config().eos_token); }
  std::optional<int32_t> pad_id() const { return id_of_declared(config().pad_token); }

 private:
  struct Impl;  // tokenizer.cpp: immutable after construction (its word cache is thread-safe)

  Tokenizer(TokenizerSpec spec, std::filesystem::path json_path, TokenizerConfig config);
  std::optional<int32_t> id_of_declared(const std::optional<std::string>& token) const;

  std::shared_ptr<const Impl> impl_;  // shared by copies
};

}  // namespace dspark::tokenizer
