// Reads a Hugging Face tokenizer.json into plain settings, checking that it describes the
// byte-level BPE family we implement (Qwen2/Qwen3, Llama-3, GPT-2). Anything else is a
// dspark::Error naming the file and the unsupported piece, never a silent fallback.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"

namespace dspark::tokenizer {

struct SplitSpec {
  std::string pattern;   // PCRE2 syntax (already translated from the tokenizer.json dialect)
  bool literal = false;  // match `pattern` as a plain string
};

struct TokenizerSpec {
  bool nfc = false;               // normalizer: NFC (alone or in a Sequence) or none
  std::vector<SplitSpec> splits;  // pre-tokenizer stages, in order
  BpeSpec bpe;
  std::vector<AddedToken> added_tokens;
};

TokenizerSpec read_tokenizer_json(const std::filesystem::path& file);

}  // namespace dspark::tokenizer
