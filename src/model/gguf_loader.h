// Turning a GGUF file (llama.cpp's layout of a Qwen3 or Llama model) into our model.
//
// Hyper-parameters come from the `<arch>.*` metadata (general.architecture "qwen3" or "llama"):
//   context_length, embedding_length, block_count, feed_forward_length, attention.head_count,
//   attention.head_count_kv, attention.key_length (head_dim; value_length must match),
//   attention.layer_norm_rms_epsilon, rope.freq_base, rope.dimension_count (must be head_dim),
//   rope.scaling.type (none; others refused), vocab_size (else token_embd's rows), and the
//   tokenizer's bos/eos ids. llama3 RoPE scaling arrives as the rope_freqs.weight tensor.
// Tensor names map to Hugging Face's: token_embd -> embed_tokens, blk.N.attn_q/k/v/output ->
// q/k/v/o_proj, attn_q_norm/attn_k_norm, ffn_gate/up/down, attn_norm -> input_layernorm,
// ffn_norm -> post_attention_layernorm, output_norm -> norm, output -> lm_head (absent: tied).
// llama.cpp's converter permutes Llama's q/k rows (within each head, the two rotary halves are
// interleaved for its RoPE); the loader undoes that. Qwen3 files are not permuted.
//
// Every tensor is dequantized exactly (ggml_quants.h) and converted to the engine's weight dtype
// (LoadOptions: f32, f16 or bf16; auto keeps the F32 / F16 / BF16 matrices' type and loads a file
// of quantized matrices in bf16); see docs/design.md for what that costs.
#pragma once
#include <string>

#include "model/config.h"
#include "model/gguf.h"

namespace dspark::model {

// The model's configuration from the file's metadata; throws naming the file and the key.
ModelConfig gguf_model_config(const GgufFile& file);

}  // namespace dspark::model
