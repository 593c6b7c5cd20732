// A Hugging Face checkpoint (config.json, *.safetensors, tokenizer.json) written as a GGUF file the
// way llama.cpp's convert_hf_to_gguf.py + llama-quantize --pure lay it out:
//   metadata: general.architecture, general.type/name, <arch>.block_count, context_length,
//     embedding_length, feed_forward_length, attention.head_count, head_count_kv, rope.freq_base,
//     attention.layer_norm_rms_epsilon, attention.key_length, value_length, general.file_type,
//     general.quantization_version (quantized types), and the tokenizer (tokenizer.ggml.model
//     "gpt2", pre, tokens padded to the vocabulary with [PADn] unused tokens, token_type, merges,
//     bos/eos/padding ids, add_bos_token, chat_template);
//   tensors: llama.cpp's names in ggml [cols, rows] order; every matrix in `type`, vectors (norms)
//     in F32; Llama's q/k rows permuted for llama.cpp's RoPE layout; no output.weight when tied.
// Q8_0/Q4_0 blocks are llama.cpp's reference quantization (ggml_quants.h), so the tensors equal
// llama-quantize's on the same values.
#pragma once
#include <string>

#include "model/ggml_quants.h"

namespace dspark::model {

// GGUF tensor name of a Hugging Face weight name ("model.layers.3.mlp.down_proj.weight" ->
// "blk.3.ffn_down.weight"); "" when it has none.
std::string gguf_tensor_name(const std::string& hf_name);

// llama.cpp's general.file_type (llama_ftype) of a model whose matrices are `type`.
uint32_t gguf_file_type(GgmlType type);

// Writes model_dir as out_path with matrices of `type` (F32, F16, BF16, Q8_0 or Q4_0). Throws a
// one-line dspark::Error naming the file and the problem (a row length that is not a multiple of
// the block size, a tokenizer llama.cpp has no pre-tokenizer for, an unwritable path).
void export_gguf(const std::string& model_dir, GgmlType type, const std::string& out_path);

}  // namespace dspark::model
