// The EAGLE-3 drafter network (deepspec-spec 2.11), DeepSpec's Qwen3Eagle3Model, defined once for
// drafting (eagle3_drafter.h) and training (train/eagle3_train_model.h): one decoder layer over
// [input_norm(embedding of token t+1) ; hidden_norm(g_t)], where g_t = fc(target features at t)
// (no norm) at verified rows and the layer's own previous output at drafted ones; logits are
// lm_head(norm(g)). RoPE position of row t is t. Attention itself is the caller's (the draft cache
// while drafting, the training-time test's unrolled keys while training).
#pragma once
#include <cstdint>
#include <tuple>

#include <torch/torch.h>

#include "draft/draft_config.h"
#include "draft/drafter_weights.h"
#include "model/linear.h"
#include "model/rope.h"
#include "model/transformer.h"

namespace dspark::draft {

class Eagle3Layer {
 public:
  Eagle3Layer(const DraftConfig& config, const WeightSource& weights);

  // g of verified rows: features [n, m hidden] -> fc(features) [n, hidden].
  torch::Tensor project_features(const torch::Tensor& features) const { return fc_.forward(features); }
  // Rows pairing tokens [n] int64 with g [n, hidden] at positions [n] int64: q [n, n_heads, hd],
  // k and v [n, n_kv_heads, hd], q and k normed (Qwen3) and rotated.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> attention_inputs(const torch::Tensor& tokens,
                                                                           const torch::Tensor& g,
                                                                           const torch::Tensor& positions) const;
  // The layer's output [n, hidden] (pre-norm; the next g) from g [n, hidden] and the attention
  // output attn [n, n_heads hd].
  torch::Tensor output(const torch::Tensor& g, const torch::Tensor& attn) const;
  // Draft logits [n, vocab] of g [n, hidden].
  torch::Tensor logits(const torch::Tensor& g) const;

 private:
  model::ModelConfig config_;   // the backbone
  model::Rope rope_;
  torch::Tensor embed_;         // [vocab, hidden]
  model::Linear lm_head_;       // [vocab, hidden]
  model::Linear fc_;            // [hidden, m * hidden], no norm after it
  model::DecoderLayer layer_;   // qkv takes 2 * hidden inputs
  torch::Tensor hidden_norm_;   // [hidden]
  torch::Tensor norm_;          // [hidden] final norm before the LM head
};

}  // namespace dspark::draft
