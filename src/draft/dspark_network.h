// The DSpark / DFlash drafter network (deepspec-spec 2.3-2.9), DeepSpec's Qwen3DSparkModel: the
// backbone, the Markov head and the confidence head, defined once for drafting and training.
//
// Backbone: the block rows [anchor, M, ..., M] (M = mask token) go through the decoder layers; the
// target's features enter every layer as keys/values only (context rows: hidden_norm(fc(features))
// through k_proj / v_proj without an input norm, k_norm on the keys, RoPE at their own positions),
// for positions strictly before the block's anchor. The block's rows see each other both ways.
// Slot k yields h_k (final-normed) and base logits U_k = lm_head h_k, predicting the token at
// anchor + k + 1; the Markov head turns U_k into Z_k, the confidence head scores it.
//
// Two modes of the one network:
//  - teacher_forced (training): all sampled blocks of a sequence in one pass under the block mask,
//    every slot's previous token the true one;
//  - draft_backbone (drafting): blocks of several requests from the draft KV cache, whose new
//    context rows it writes; the Markov and confidence heads then run slot by slot while the
//    drafter samples (markov().step, confidence().logit).
// The layers run as libtorch ops (training, other devices, and drafting when asked) or, for
// drafting on the CPU, through the target's rows kernels (model::decoder_layer_rows); the choice
// is draft_backbone's `tensor_ops` argument.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "draft/confidence_head.h"
#include "draft/draft_config.h"
#include "draft/drafter_weights.h"
#include "draft/markov_head.h"
#include "model/kv_cache.h"
#include "model/linear.h"
#include "model/rope.h"
#include "model/transformer.h"

namespace dspark::draft {

// [n B, S + n B] true where query row (block b, slot k) may attend to the key: context position
// j < anchors[b], or any slot of block b. Row-major blocks, context keys first.
torch::Tensor block_attention_mask(const std::vector<int64_t>& anchors, int64_t seq_len, int64_t block_size);

// One request's block in draft_backbone.
struct CachedBlock {
  int64_t slot = 0;       // draft KV-cache slot
  int64_t anchor = 0;     // token at position `start` = cache length + n_context
  int64_t n_context = 0;  // new context rows (target features) to write before the block
};

class DSparkNetwork {
 public:
  DSparkNetwork(const DraftConfig& config, const WeightSource& weights);

  struct BlockScores {
    torch::Tensor logits;             // [n, B, vocab] Z (U without a Markov head)
    torch::Tensor confidence_logits;  // [n, B] (undefined without a confidence head)
  };
  // Training: features [S, m hidden] f32 target features, ids [S] int64 tokens, anchors in
  // [0, S-1] ascending. Slot k of block b predicts ids[anchors[b] + k + 1], its Markov previous
  // token the true ids[anchors[b] + k].
  BlockScores teacher_forced(const torch::Tensor& features, const torch::Tensor& ids,
                             const std::vector<int64_t>& anchors) const;

  // Drafting: features [sum n_context, m hidden] f32 the blocks' new context rows in order. Writes
  // their keys/values to positions length.. of each slot in every layer (committing them is the
  // caller's); the block's own keys land past them and are overwritten by the next call.
  // Returns h [n_blocks B, hidden].
  torch::Tensor draft_backbone(const torch::Tensor& features, const std::vector<CachedBlock>& blocks,
                               model::KvCache& cache, bool tensor_ops) const;
  // U = lm_head h: h [n, hidden] -> [n, vocab].
  torch::Tensor base_logits(const torch::Tensor& h) const { return lm_head_.forward(h); }

  const MarkovHeadModule& markov() const { return markov_; }
  const ConfidenceHead& confidence() const { return confidence_; }

 private:
  // Attention of the block rows of one layer: q [nB, n_heads, hd], the block's k / v [nB, n_kv,
  // hd], the context rows' k / v [n_ctx, n_kv, hd] (undefined without context) -> [nB, n_heads hd].
  using BlockAttention = std::function<torch::Tensor(int64_t layer, const torch::Tensor& q, const torch::Tensor& k_block,
                                                     const torch::Tensor& v_block, const torch::Tensor& k_context,
                                                     const torch::Tensor& v_context)>;
  // features [n, m hidden] -> hidden_norm(fc(features)) [n, hidden], shared by every layer.
  torch::Tensor project_context(const torch::Tensor& features) const;
  // Layer l's k_proj / v_proj as one linear layer: context rows [n, hidden] -> [n, 2 n_kv hd] (keys,
  // then values; neither normed nor rotated). Its weight is a view of the layer's qkv weight, or
  // for quantized weights a copy of their k and v rows' blocks (quantized_context_kv_).
  model::Linear context_kv_proj(int64_t layer) const;
  // Layer l's keys and values [n, n_kv, hd] of the context rows context [n, hidden] at the
  // positions of cos / sin [n, 1, hd].
  std::pair<torch::Tensor, torch::Tensor> context_kv(int64_t layer, const torch::Tensor& context,
                                                     const torch::Tensor& cos, const torch::Tensor& sin) const;
  // Block rows' embeddings: block_ids [nB] -> [nB, hidden] f32.
  torch::Tensor embed_block(const std::vector<int64_t>& block_ids) const;
  // libtorch execution: x [nB, hidden] block rows at block_pos [nB], context [n_ctx, hidden] at
  // context_pos [n_ctx]. Returns the last layer's output.
  torch::Tensor layers(torch::Tensor x, const torch::Tensor& context, const torch::Tensor& block_pos,
                       const torch::Tensor& context_pos, const BlockAttention& attend) const;
  // draft_backbone on the CPU rows kernels: block_ids / block_pos [nB], context_pos [n_ctx] the
  // context rows' positions. Returns h [nB, hidden].
  torch::Tensor backbone_rows(const torch::Tensor& features, const std::vector<int64_t>& block_ids,
                              const std::vector<int64_t>& block_pos, const std::vector<int64_t>& context_pos,
                              const std::vector<CachedBlock>& blocks, model::KvCache& cache) const;
  // Its layers over x [nB, hidden] (updated in place); context [n_ctx, hidden] (undefined when
  // empty); cos / sin rows [nB, hd] of the block and [n_ctx, hd] of the context.
  void layers_rows(torch::Tensor& x, const torch::Tensor& context, const torch::Tensor& cos_b, const torch::Tensor& sin_b,
                   const torch::Tensor& cos_c, const torch::Tensor& sin_c, const std::vector<CachedBlock>& blocks,
                   model::KvCache& cache) const;

  DraftConfig config_;
  model::Rope rope_;
  torch::Tensor embed_;                     // [vocab, hidden]
  model::Linear lm_head_;                   // [vocab, hidden]
  model::Linear fc_;                        // [hidden, m * hidden]
  torch::Tensor hidden_norm_;               // [hidden]
  std::vector<model::DecoderLayer> layers_;
  std::vector<model::Linear> quantized_context_kv_;  // per layer, when its qkv is quantized
  torch::Tensor norm_;                      // [hidden]
  MarkovHeadModule markov_;
  ConfidenceHead confidence_;
};

}  // namespace dspark::draft
