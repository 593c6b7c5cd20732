#include "tokenizer/tokenizer_gguf.h"

#include "tokenizer/regex.h"

namespace dspark::tokenizer {

namespace {

// llama.cpp's token types (llama_token_type).
enum GgufTokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::optional<std::string> token_of(const model::GgufFile& file, const std::vector<std::string>& tokens,
                                    const std::string& key) {
  const std::optional<int64_t> id = file.find_int(key);
  if (!id) return std::nullopt;
  if (*id < 0 || *id >= static_cast<int64_t>(tokens.size()))
    file.fail(key + " " + std::to_string(*id) + " is not a token id (vocabulary of " + std::to_string(tokens.size()) + ")");
  return tokens[static_cast<size_t>(*id)];
}

}  // namespace

std::optional<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& name) {
  if (name == "qwen2") return GgufPreTokenizer{kQwen2Pattern, true};
  if (name == "llama-bpe" || name == "llama3") return GgufPreTokenizer{kLlama3Pattern, false};
  if (name == "gpt-2" || name == "default") return GgufPreTokenizer{kGpt2Pattern, false};
  return std::nullopt;
}

TokenizerSpec read_gguf_tokenizer(const model::GgufFile& file) {
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    file.fail("tokenizer.ggml.model '" + model + "' is not supported (supported: gpt2, byte-level BPE)");
  const std::string pre_name = file.find_string("tokenizer.ggml.pre").value_or("default");
  const std::optional<GgufPreTokenizer> pre = gguf_pre_tokenizer(pre_name);
  if (!pre) file.fail("tokenizer.ggml.pre '" + pre_name + "' is not supported (supported: qwen2, llama-bpe, gpt-2)");

  const std::vector<std::string> tokens = file.get_strings("tokenizer.ggml.tokens");
  std::vector<int64_t> types(tokens.size(), kNormal);
  if (file.has("tokenizer.ggml.token_type")) types = file.get_ints("tokenizer.ggml.token_type");
  if (types.size() != tokens.size())
    file.fail("tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
              std::to_string(tokens.size()) + " tokens");
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) file.fail("tokenizer.ggml.tokens is too long");

  TokenizerSpec spec;
  spec.nfc = pre->nfc;
  spec.splits.push_back(SplitSpec{to_pcre2_pattern(pre->pattern), false});
  for (size_t id = 0; id < tokens.size(); ++id) {
    const auto id32 = static_cast<int32_t>(id);
    switch (types[id]) {
      case kNormal: spec.bpe.vocab.emplace_back(tokens[id], id32); break;
      case kControl: spec.added_tokens.push_back(AddedToken{id32, tokens[id], true}); break;
      case kUserDefined: spec.added_tokens.push_back(AddedToken{id32, tokens[id], false}); break;
      case kUnused: break;
      default:
        file.fail("token " + std::to_string(id) + " has token type " + std::to_string(types[id]) +
                  ", which byte-level BPE does not use (supported: 1 normal, 3 control, 4 user-defined, 5 unused)");
    }
  }
  if (file.has("tokenizer.ggml.merges")) {
    for (const std::string& merge : file.get_strings("tokenizer.ggml.merges")) {
      const size_t space = merge.find(' ', 1);
      if (space == std::string::npos || space + 1 >= merge.size())
        file.fail("tokenizer.ggml.merges entry '" + merge.substr(0, 100) + "' is not two tokens separated by a space");
      spec.bpe.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
    }
  }
  return spec;
}

TokenizerConfig read_gguf_tokenizer_config(const model::GgufFile& file) {
  TokenizerConfig config;
  config.path = file.path();
  if (file.has("tokenizer.ggml.tokens")) {
    const std::vector<std::string> tokens = file.get_strings("tokenizer.ggml.tokens");
    config.bos_token = token_of(file, tokens, "tokenizer.ggml.bos_token_id");
    config.eos_token = token_of(file, tokens, "tokenizer.ggml.eos_token_id");
    config.pad_token = token_of(file, tokens, "tokenizer.ggml.padding_token_id");
  }
  config.chat_template = file.find_string("tokenizer.chat_template");
  if (config.chat_template) config.chat_template_origin = file.path();
  return config;
}

}  // namespace dspark::tokenizer
