// The target model: a Hugging Face Qwen3 / Llama decoder-only transformer over a ragged,
// flattened batch.
//
// One forward runs several sequences at once, each in its own KV-cache slot with its own number of
// new tokens (1 for decode, k+1 for verification, many for prefill). All new tokens are flattened
// to [n_tokens, hidden] for every matmul; a per-token sequence index and position drive attention,
// which is causal within each sequence over its cached positions plus its new tokens. No padding.
#pragma once
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "model/config.h"
#include "model/device.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/rope.h"

namespace dspark::model {

// One sequence's share of a ragged batch. Its new tokens are contiguous in ForwardBatch::token_ids,
// in the order of ForwardBatch::seqs.
struct SeqChunk {
  int64_t slot = 0;   // KV-cache slot; the tokens continue the slot's committed positions
  int64_t n_new = 0;  // new tokens of this sequence in this forward (>= 1)
};

struct ForwardBatch {
  std::vector<int64_t> token_ids;       // [n_tokens] all sequences' new tokens, flattened
  std::vector<SeqChunk> seqs;           // [n_seqs]
  std::vector<int64_t> logit_rows;      // rows of token_ids whose logits are wanted (may be empty)
  std::vector<int64_t> capture_layers;  // 0-based decoder layers whose outputs are returned
  bool capture_final_hidden = false;    // also return the final-normed hidden state
};

struct ForwardOutput {
  torch::Tensor logits;                     // [logit_rows.size(), vocab] f32
  std::vector<torch::Tensor> layer_hidden;  // per capture layer: [n_tokens, hidden] f32, residual
                                            // stream after that layer, before the final norm
  torch::Tensor final_hidden;               // [n_tokens, hidden] f32 (if asked)

  // The captured layers side by side, as drafters read them: [n_tokens, m * hidden]; [0, 0] when
  // no layer was captured.
  torch::Tensor captured_features() const {
    return layer_hidden.empty() ? torch::empty({0, 0}) : torch::cat(layer_hidden, 1);
  }
};

// Weight matrices' precision in memory (norms, biases and activations are always f32). kAuto keeps
// the checkpoint's: Transformer::load resolves it (stored_weight_dtype) and weight_dtype() reports
// the result; the others convert on load. kQ8_0 / kQ4_0: llama.cpp's 8- and 4-bit blocks
// (model/quantized_weight.h) for every matrix, the embedding and the LM head included (a GGUF
// file's blocks of that type as they are, anything else quantized at load); CPU only.
enum class WeightDType { kAuto, kF32, kF16, kBF16, kQ8_0, kQ4_0 };
const char* weight_dtype_name(WeightDType dtype);  // "auto", "f32", "f16", "bf16", "q8_0", "q4_0"
// The dtype matrices are read in: a quantized dtype's matrices are read in f32, then quantized.
torch::ScalarType weight_scalar_type(WeightDType dtype);  // not kAuto
bool is_quantized(WeightDType dtype);
// The one dtype that holds every given weight matrix dtype exactly: theirs when they agree, else
// f32 (f16 and bf16 hold each other's values only in part); f32 for none.
WeightDType common_weight_dtype(const std::vector<WeightDType>& dtypes);

// Which code runs a forward on the CPU. Every other device always takes libtorch's ops.
enum class Kernels {
  kAuto,       // CPU: our streaming row kernels for up to kSmallBatchRows tokens, libtorch beyond
  kTensorOps,  // libtorch's ops only: on the CPU, the very code a CUDA device runs (tests use it
               // to check that path in CPU-only CI)
};
class GgufFile;

struct LoadOptions {
  WeightDType weight_dtype = WeightDType::kAuto;
  KvCacheDType kv_cache_dtype = KvCacheDType::kF32;  // of every cache make_cache returns
  torch::Device device = default_device();  // the CLI's --device (model/device.h), else the CPU
  Kernels kernels = Kernels::kAuto;
};

struct DecoderLayer {
  torch::Tensor input_norm;      // [hidden]
  Linear qkv;                    // [(n_heads + 2 n_kv_heads) head_dim, hidden]: q, k, v fused
  torch::Tensor q_norm, k_norm;  // [head_dim] (Qwen3 only)
  Linear o_proj;                 // [hidden, n_heads head_dim]
  torch::Tensor post_norm;       // [hidden]
  Linear gate_up;                // [2 intermediate, hidden]: gate then up, fused
  Linear down;                   // [hidden, intermediate]
};

class Transformer {
 public:
  // dir holds config.json and *.safetensors (single or sharded), or is a .gguf file (see
  // gguf_loader.h). Throws dspark::Error naming the file and the problem on bad input.
  static Transformer load(const std::string& dir, const LoadOptions& options = {});

  // Entry points. Each appends the new tokens' keys/values to the cache and commits them.
  // prefill: one sequence, many tokens; logits of the last token.
  ForwardOutput prefill(KvCache& cache, int64_t slot, const std::vector<int64_t>& token_ids,
                        const std::vector<int64_t>& capture_layers = {});
  // decode: one new token per sequence; logits [n_seqs, vocab].
  torch::Tensor decode(KvCache& cache, const std::vector<int64_t>& slots, const std::vector<int64_t>& token_ids);
  // verify / general ragged step: logits of the rows asked for.
  ForwardOutput forward(KvCache& cache, const ForwardBatch& batch);

  // Training and teacher forcing: full causal attention within each row of `ids`, no KV cache,
  // libtorch ops only (autograd-friendly). ids: [batch, seq_len] int64 on the model's device.
  // Returns final_hidden [batch, seq_len, hidden] (final-normed) and the captured layers'
  // outputs [batch, seq_len, hidden]; no logits (see lm_head).
  ForwardOutput forward_sequences(const torch::Tensor& ids, const std::vector<int64_t>& capture_layers = {}) const;
  // The LM head on final-normed hidden states: [..., hidden] -> [..., vocab] f32.
  torch::Tensor lm_head(const torch::Tensor& final_hidden) const;
  // [vocab, hidden]: the weights as loaded (dequantized to f32 copies when quantized).
  torch::Tensor embedding() const;
  torch::Tensor lm_head_weight() const;

  // Every trainable tensor once (a tied head is the embedding), under stable names: the
  // checkpoint names, except the fused "...self_attn.qkv_proj.weight" and "...mlp.gate_up_proj.weight".
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;
  void set_requires_grad(bool requires_grad);
  // Writes config.json and model.safetensors (Hugging Face names, fused tensors split) with matrices
  // in `dtype` (kAuto: the model's weight_dtype()), vectors in f32;
  // with max_shard_bytes > 0 and more weight bytes than that, Hugging Face's sharded layout instead
  // (model-0000i-of-0000n.safetensors + model.safetensors.index.json).
  void save(const std::string& dir, WeightDType dtype, size_t max_shard_bytes = 0) const;

  // A cache of LoadOptions::kv_cache_dtype.
  KvCache make_cache(int64_t n_slots, int64_t capacity) const;
  // The decoder layers, for benchmarks that time their parts alone (bench kernels).
  const std::vector<DecoderLayer>& layers() const { return layers_; }

  const ModelConfig& config() const { return config_; }
  const torch::Device& device() const { return device_; }
  Kernels kernels() const { return kernels_; }
  int64_t weight_bytes() const;  // bytes of all weights (what one decode step streams)
  WeightDType weight_dtype() const { return weight_dtype_; }  // resolved: never kAuto
  KvCacheDType kv_cache_dtype() const { return kv_cache_dtype_; }

 private:
  Transformer(ModelConfig config, const LoadOptions& options);
  void load_weights(const std::string& dir);
  void load_gguf_weights(const GgufFile& file);  // gguf_loader.cpp
  void place_weights();
  void quantize_weights();  // the matrices, embedding and head to weight_dtype_'s blocks
  // Embedding rows of ids [n] (int64, on the model's device) as f32 [n, hidden].
  torch::Tensor embed_rows(const torch::Tensor& ids) const;

  // Whether a forward of at most kSmallBatchRows tokens takes the rows path (decoder_layer_rows):
  // on the CPU with Kernels::kAuto, unless gradients are wanted.
  bool runs_rows_path() const;
  // Throws dspark::Error on a batch that does not fit the model or the cache; writes nothing.
  void check_batch(const KvCache& cache, const ForwardBatch& batch) const;
  // forward of a checked batch. On the CPU the rows path (decoder_layer_rows) takes batches of up
  // to kSmallBatchRows tokens; longer ones, and autograd or other devices, go through libtorch.
  ForwardOutput forward_checked(KvCache& cache, const ForwardBatch& batch);
  // A long CPU batch (a prefill) as consecutive pieces of kSmallBatchRows tokens through the rows
  // path: 6x faster than libtorch's GEMMs on the 2-core dev box (a 1024-token prefill of the
  // Qwen3-0.6B shape, bf16: 30.6 s -> 4.8 s), and since the rows kernels give a token the same
  // bits whatever else is in its batch, a prompt's logits equal those of decoding it token by token.
  ForwardOutput forward_in_pieces(KvCache& cache, const ForwardBatch& batch);
  torch::Tensor attention(const torch::Tensor& q, KvCache& cache, int64_t layer, const ForwardBatch& batch,
                          const std::vector<int64_t>& n_past) const;
  // Autograd and other devices: libtorch ops.
  torch::Tensor layer_forward(int64_t layer, const torch::Tensor& x, const torch::Tensor& cos,
                              const torch::Tensor& sin, KvCache& cache, const ForwardBatch& batch,
                              const std::vector<int64_t>& n_past, const torch::Tensor& write_slots,
                              const torch::Tensor& write_positions) const;

  ModelConfig config_;
  torch::Device device_;
  WeightDType weight_dtype_;  // as asked until load resolves kAuto
  KvCacheDType kv_cache_dtype_;
  Kernels kernels_;
  Rope rope_;
  torch::Tensor embed_;  // [vocab, hidden]; undefined when quantized
  QuantizedWeight embed_quantized_;  // an untied embedding, quantized (a tied one is lm_head_'s)
  std::vector<DecoderLayer> layers_;
  torch::Tensor final_norm_;  // [hidden]
  Linear lm_head_;            // [vocab, hidden]; shares embed_ when tied
};

class SafetensorsArchive;
enum class DType;  // safetensors.h

// The two halves of a Qwen3/Llama decoder layer around attention, shared by the target's paths and
// the drafters' backbones. x: [..., hidden]. attention_inputs returns q [..., n_heads, hd] and
// k, v [..., n_kv_heads, hd], q and k normed (Qwen3) and rotated with cos/sin; layer_output adds
// the attention output [..., n_heads hd] through o_proj, then the MLP, both as residuals.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> attention_inputs(const DecoderLayer& layer,
                                                                         const ModelConfig& config,
                                                                         const torch::Tensor& x,
                                                                         const torch::Tensor& cos,
                                                                         const torch::Tensor& sin);
torch::Tensor layer_output(const DecoderLayer& layer, const ModelConfig& config, const torch::Tensor& x,
                           const torch::Tensor& attn);
// One sequence's rows in decoder_layer_rows: n_new consecutive rows of x, at positions
// n_past .. n_past + n_new - 1 of its cache slot.
struct RowsSeq {
  int64_t slot = 0;
  int64_t n_past = 0;
  int64_t n_new = 0;
  bool causal = true;  // false: the rows see each other both ways (a drafter's block)
};

// A decoder layer over at most kSmallBatchRows rows on the CPU (decode, verify, a drafter's
// blocks): fused raw-pointer element-wise ops around the streaming kernels, since libtorch's
// per-op dispatch would cost as much as the arithmetic. Writes each sequence's keys/values at its
// positions in layer `cache_layer` of `cache` (committing is the caller's) and updates x
// [n_rows, hidden] f32 in place. cos/sin: [n_rows, head_dim] f32, contiguous.
void decoder_layer_rows(const DecoderLayer& layer, const ModelConfig& config, KvCache& cache, int64_t cache_layer,
                        const std::vector<RowsSeq>& seqs, const torch::Tensor& cos, const torch::Tensor& sin,
                        torch::Tensor& x);
// Writes rows of keys/values ([n, n_kv_heads * head_dim] each, row stride `row_stride` floats) to
// positions first_position.. of `slot` in layer `cache_layer`; CPU.
void write_kv_rows(KvCache& cache, int64_t cache_layer, int64_t slot, int64_t first_position, int64_t n,
                   const float* keys, const float* values, int64_t row_stride);

// Reads "<prefix>input_layernorm.weight", "<prefix>self_attn.q_proj.weight", ... (Hugging Face
// names) into a DecoderLayer with fused qkv and gate_up on `device`; matrices in matrix_dtype,
// vectors in f32. attention_input: the width q/k/v_proj read (0: hidden_size; EAGLE-3's layer
// reads 2 * hidden).
DecoderLayer load_decoder_layer(const SafetensorsArchive& archive, const std::string& prefix, const ModelConfig& config,
                                torch::ScalarType matrix_dtype, const torch::Device& device,
                                int64_t attention_input = 0);
torch::ScalarType to_scalar_type(DType dtype);  // a safetensors dtype as torch's
// The precision of a safetensors checkpoint's matrices (its 2-D tensors; common_weight_dtype when
// they differ), what WeightDType::kAuto keeps.
WeightDType stored_weight_dtype(const SafetensorsArchive& archive);
// A checkpoint tensor copied out of the mmap in `dtype` (into huge pages when it is large, see
// huge_pages.h); throws if absent or mis-shaped.
torch::Tensor read_tensor(const SafetensorsArchive& archive, const std::string& name, const std::vector<int64_t>& shape,
                          torch::ScalarType dtype);

// RMSNorm over the last dimension in f32: x / sqrt(mean(x^2) + eps) * weight.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace dspark::model
