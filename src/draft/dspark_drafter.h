// DSpark (and DFlash, its heads switched off): DeepSpec's Qwen3DSparkModel (deepspec-spec 2.3-2.9).
//
// Parallel stage: one backbone pass over a block [anchor, M, ..., M] (M = mask token), with the
// target's features entering every layer as keys/values only, for positions strictly before the
// anchor. Every slot k yields h_k and base logits U_k, predicting the token at anchor + k + 1.
// Sequential stage (DSpark): Z_k = U_k + W2 W1[x_{k-1}] (x_{-1} = anchor), sampled left to right
// from the same sampling transform the verifier applies, with the confidence
// c_k = sigmoid(w [h_k ; W1[x_{k-1}]] + b). DFlash samples every slot from U_k independently.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "draft/draft_config.h"
#include "draft/drafter.h"
#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/transformer.h"

namespace dspark::draft {

// The STS temperatures file in a drafter directory (written by `dspark calibrate`).
inline constexpr const char* kStsFile = "sts.json";

struct DrafterLoadOptions {
  int64_t max_slots = 1;
  int64_t capacity = 4096;  // positions per slot (prompt + generated)
  model::WeightDType weight_dtype = model::WeightDType::kBF16;
};

// The embedding / LM head a drafter uses. DeepSpec stores frozen bf16 copies of the target's
// (deepspec-spec 1.5). When `name` is absent, or equals the target's tensor bit for bit, the
// target's tensor is shared. When it equals the target's rounded to bf16 (an f32 target), the
// stored copy is used, as DeepSpec does. Anything else means the drafter was trained for another
// target: dspark::Error.
torch::Tensor shared_or_stored(const model::SafetensorsArchive& archive, const std::string& name,
                               const torch::Tensor& target_tensor, const std::string& dir);

// One block's intermediate tensors, for reference checks and `dspark draft`.
struct BlockTrace {
  torch::Tensor hidden;       // [block_size, hidden] h_k (final-normed)
  torch::Tensor base_logits;  // [block_size, vocab] U_k
};

class DSparkDrafter : public Drafter {
 public:
  // dir: DeepSpec layout (config.json + safetensors). embed_tokens / lm_head, when stored, must
  // equal the target's; the target's tensors are used either way. `target` must outlive this.
  static std::unique_ptr<DSparkDrafter> load(const std::string& dir, const model::Transformer& target,
                                             const DrafterLoadOptions& options);

  std::string method() const override { return method_name(config_.method); }
  const std::vector<int64_t>& target_layer_ids() const override { return config_.target_layer_ids; }
  int64_t max_slots() const override { return static_cast<int64_t>(slots_.size()); }
  int64_t max_gamma() const override { return config_.block_size; }
  void begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) override;
  std::vector<DraftBlock> propose(const std::vector<DraftRequest>& requests) override;
  void commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) override;
  void end(int64_t slot) override;

  const DraftConfig& config() const { return config_; }
  // Sequential Temperature Scaling (dspark-method.md 4.2): c_k = sigmoid(logit_k / T_k), one T per
  // slot (missing slots: 1). `dspark calibrate` fits them and saves them as sts.json beside the
  // weights, which load() applies. Empty: the raw confidences.
  void set_confidence_temperatures(const std::vector<double>& temperatures);
  const std::vector<float>& confidence_temperatures() const { return confidence_temperatures_; }
  // Set by propose() for each request when tracing is on (tests, `dspark draft`).
  void set_tracing(bool on) { tracing_ = on; }
  const std::vector<BlockTrace>& last_traces() const { return traces_; }

 private:
  DSparkDrafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options);
  void load_weights(const std::string& dir, torch::ScalarType matrix_dtype);

  struct SlotState {
    bool active = false;
    int64_t start = 0;                   // position of the next anchor
    std::vector<torch::Tensor> pending;  // target features of positions cache_len..start-1, [rows, m*d] each
  };
  // Backbone over the requests' pending context and blocks: returns h [n_req * block_size, hidden]
  // and commits the context rows' keys/values to the draft cache.
  torch::Tensor backbone(const std::vector<DraftRequest>& requests);
  // The backbone's layers over the block rows x [n_req * block_size, hidden] (updated), after
  // the context rows' keys/values ([n_ctx, hidden] projected features, n_context[r] rows each) are
  // written to the draft cache. CPU: the target's rows path (decoder_layer_rows), blocks as
  // non-causal sequences; other devices: libtorch ops.
  void layers_rows(const std::vector<DraftRequest>& requests, const std::vector<int64_t>& n_context,
                   const torch::Tensor& context, const torch::Tensor& context_pos, const torch::Tensor& block_pos,
                   torch::Tensor& x);
  void layers_tensor_ops(const std::vector<DraftRequest>& requests, const std::vector<int64_t>& n_context,
                         const torch::Tensor& context, const torch::Tensor& context_pos,
                         const torch::Tensor& block_pos, torch::Tensor& x);
  // Markov bias [n, vocab] from the previous tokens' W1 rows [n, r] (and, for the RNN head, the
  // slot's h [n, hidden] and the carried state [n, r], updated in place).
  // logits += the Markov bias for the requests' previous tokens, in place: U_k becomes Z_k.
  // logits: [n, vocab] (rows may be strided), hidden: [n, hidden] h_k (RNN head only).
  void add_markov_bias(torch::Tensor logits, const std::vector<int64_t>& prev, const torch::Tensor& hidden,
                       torch::Tensor& rnn_state) const;
  torch::Tensor markov_bias(const torch::Tensor& w1_prev, const torch::Tensor& hidden, torch::Tensor& rnn_state) const;
  SlotState& slot_state(int64_t slot);

  DraftConfig config_;
  const model::Transformer& target_;
  model::Rope rope_;
  model::KvCache cache_;
  std::vector<SlotState> slots_;
  // Weights
  torch::Tensor embed_;                     // [vocab, hidden] (usually the target's)
  torch::Tensor lm_head_;                   // [vocab, hidden] (usually the target's)
  model::Linear fc_;                        // [hidden, m * hidden]
  torch::Tensor hidden_norm_;               // [hidden]
  std::vector<model::DecoderLayer> layers_;
  torch::Tensor norm_;                      // [hidden]
  torch::Tensor markov_w1_;                 // [vocab, r] f32 (row lookup)
  model::Linear markov_w2_;                 // [vocab, r]
  bool markov_w1_is_bf16_ = false;          // every W1 value is a bf16 number
  model::Linear rnn_joint_;                 // [3r, 2r + hidden] with bias (RNN head)
  torch::Tensor confidence_w_;              // [hidden (+ r)] f32
  float confidence_b_ = 0;
  std::vector<float> confidence_token_term_;  // [vocab] w[hidden:] . W1[x] for every token x
  std::vector<float> confidence_temperatures_;  // STS, per slot
  bool tracing_ = false;
  std::vector<BlockTrace> traces_;
};

}  // namespace dspark::draft
