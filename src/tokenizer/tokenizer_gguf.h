// The tokenizer stored in a GGUF file's metadata (llama.cpp's "gpt2" model: byte-level BPE), read
// into the same settings a tokenizer.json gives:
//   tokenizer.ggml.tokens      every token's byte-level spelling, by id
//   tokenizer.ggml.token_type  1 normal (the BPE vocabulary), 3 control (a special added token),
//                              4 user-defined (a non-special added token), 5 unused (no token),
//                              2 unknown / 6 byte: refused (not byte-level BPE)
//   tokenizer.ggml.merges      "left right", in rank order
//   tokenizer.ggml.pre         the pre-tokenizer: its split regex (and NFC for Qwen2) as the
//                              matching tokenizer.json has it
//   tokenizer.ggml.bos_token_id / eos_token_id / padding_token_id, tokenizer.chat_template
// Anything else (another tokenizer model, an unknown pre-tokenizer) is a dspark::Error naming the
// file and the value.
#pragma once
#include "model/gguf.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/tokenizer_json.h"

namespace dspark::tokenizer {

TokenizerSpec read_gguf_tokenizer(const model::GgufFile& file);
// bos/eos/pad token spellings and the chat template; path and chat_template_origin are the file.
TokenizerConfig read_gguf_tokenizer_config(const model::GgufFile& file);

// The split regex (tokenizer.json dialect) of a llama.cpp pre-tokenizer name, and whether its
// tokenizer normalises to NFC; nullopt for a name we do not know.
struct GgufPreTokenizer {
  std::string pattern;
  bool nfc = false;
};
std::optional<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& name);

}  // namespace dspark::tokenizer
