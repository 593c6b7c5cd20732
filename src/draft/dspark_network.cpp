#include "draft/dspark_network.h"

#include <algorithm>

#include "common/error.h"
#include "draft/grouped_attention.h"
#include "model/kernels/row_ops.h"

namespace dspark::draft {

torch::Tensor block_attention_mask(const std::vector<int64_t>& anchors, int64_t seq_len, int64_t block_size) {
  const int64_t n = static_cast<int64_t>(anchors.size());
  const torch::Tensor row_anchor = torch::tensor(anchors, torch::kLong).repeat_interleave(block_size);  // [n B]
  const torch::Tensor context = torch::arange(seq_len, torch::kLong).unsqueeze(0) < row_anchor.unsqueeze(1);
  const torch::Tensor row_block = torch::arange(n, torch::kLong).repeat_interleave(block_size);
  const torch::Tensor same_block = row_block.unsqueeze(1) == row_block.unsqueeze(0);
  return torch::cat({context, same_block}, 1);
}

DSparkNetwork::DSparkNetwork(const DraftConfig& config, const WeightSource& weights)
    : config_(config), rope_(config.backbone), embed_(weights.embed()), lm_head_(weights.lm_head_linear()) {
  const model::ModelConfig& c = config_.backbone;
  const int64_t d = c.hidden_size, m = static_cast<int64_t>(config_.target_layer_ids.size());
  fc_ = weights.linear("fc.weight", {d, m * d});
  hidden_norm_ = weights.vector("hidden_norm.weight", {d});
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    layers_.push_back(weights.layer("layers." + std::to_string(l) + ".", c));
    const model::Linear& qkv = layers_.back().qkv;
    if (!qkv.quantized.defined()) continue;
    model::Linear kv_proj{{}, qkv.bias.defined() ? qkv.bias.narrow(0, q_dim, 2 * kv_dim) : torch::Tensor()};
    kv_proj.quantized = qkv.quantized.row_range(q_dim, 2 * kv_dim);
    quantized_context_kv_.push_back(std::move(kv_proj));
  }
  norm_ = weights.vector("norm.weight", {d});
  markov_ = MarkovHeadModule(config_, weights);
  confidence_ = ConfidenceHead(config_, weights, markov_);
}

torch::Tensor DSparkNetwork::project_context(const torch::Tensor& features) const {
  return model::rms_norm(fc_.forward(features), hidden_norm_, config_.backbone.rms_norm_eps);
}

model::Linear DSparkNetwork::context_kv_proj(int64_t l) const {
  const model::ModelConfig& c = config_.backbone;
  const model::DecoderLayer& layer = layers_[l];
  if (layer.qkv.quantized.defined()) return quantized_context_kv_[l];
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  model::Linear kv_proj{layer.qkv.weight.narrow(0, q_dim, 2 * kv_dim),
                        layer.qkv.bias.defined() ? layer.qkv.bias.narrow(0, q_dim, 2 * kv_dim) : torch::Tensor()};
  kv_proj.bf16_math = layer.qkv.bf16_math;
  return kv_proj;
}

std::pair<torch::Tensor, torch::Tensor> DSparkNetwork::context_kv(int64_t l, const torch::Tensor& context,
                                                                  const torch::Tensor& cos, const torch::Tensor& sin) const {
  const model::ModelConfig& c = config_.backbone;
  const int64_t kv_dim = c.n_kv_heads * c.head_dim;
  const torch::Tensor kv = context_kv_proj(l).forward(context);  // [n, 2 kv_dim]
  torch::Tensor k = kv.narrow(1, 0, kv_dim).reshape({-1, c.n_kv_heads, c.head_dim});
  const torch::Tensor v = kv.narrow(1, kv_dim, kv_dim).reshape({-1, c.n_kv_heads, c.head_dim});
  if (c.qk_norm) k = model::rms_norm(k, layers_[l].k_norm, c.rms_norm_eps);
  return {model::Rope::apply(k, cos, sin), v};
}

torch::Tensor DSparkNetwork::embed_block(const std::vector<int64_t>& block_ids) const {
  return embed_.index_select(0, torch::tensor(block_ids, torch::kLong).to(embed_.device())).to(torch::kFloat32);
}

torch::Tensor DSparkNetwork::layers(torch::Tensor x, const torch::Tensor& context, const torch::Tensor& block_pos,
                                    const torch::Tensor& context_pos, const BlockAttention& attend) const {
  const model::ModelConfig& c = config_.backbone;
  auto [cos_b, sin_b] = rope_.cos_sin(block_pos);
  auto [cos_c, sin_c] = rope_.cos_sin(context_pos);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const model::DecoderLayer& layer = layers_[l];
    auto [q, k_block, v_block] = model::attention_inputs(layer, c, x, cos_b, sin_b);  // [nB, heads, hd]
    torch::Tensor k_context, v_context;
    if (context.defined()) std::tie(k_context, v_context) = context_kv(l, context, cos_c, sin_c);
    x = model::layer_output(layer, c, x, attend(l, q, k_block, v_block, k_context, v_context));
  }
  return x;
}

DSparkNetwork::BlockScores DSparkNetwork::teacher_forced(const torch::Tensor& features, const torch::Tensor& ids,
                                                         const std::vector<int64_t>& anchors) const {
  const model::ModelConfig& c = config_.backbone;
  const int64_t S = ids.size(0), B = config_.block_size, n = static_cast<int64_t>(anchors.size());
  const torch::Device device = features.device();
  const torch::Tensor ids_cpu = ids.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* id = ids_cpu.data_ptr<int64_t>();
  std::vector<int64_t> block_ids(n * B), block_pos(n * B), prev_ids(n * B);
  for (int64_t b = 0; b < n; ++b) {
    if (anchors[b] < 0 || anchors[b] >= S) throw Error("train drafter: anchor outside the sequence");
    for (int64_t k = 0; k < B; ++k) {
      block_ids[b * B + k] = k == 0 ? id[anchors[b]] : config_.mask_token_id;
      block_pos[b * B + k] = anchors[b] + k;
      // Teacher forcing: the Markov head's previous token is the true token before the label.
      prev_ids[b * B + k] = id[std::min(anchors[b] + k, S - 1)];
    }
  }
  auto on_device = [&](const std::vector<int64_t>& v) { return torch::tensor(v, torch::kLong).to(device); };

  const torch::Tensor context = project_context(features.to(torch::kFloat32));  // [S, d]
  const torch::Tensor allowed = block_attention_mask(anchors, S, B).to(device);  // [nB, S + nB]
  auto attend = [&](int64_t, const torch::Tensor& q, const torch::Tensor& k_block, const torch::Tensor& v_block,
                    const torch::Tensor& k_context, const torch::Tensor& v_context) {
    return grouped_attention(q, torch::cat({k_context, k_block}).transpose(0, 1),
                             torch::cat({v_context, v_block}).transpose(0, 1), allowed);
  };
  const torch::Tensor x = layers(embed_block(block_ids), context, on_device(block_pos),
                                 torch::arange(S, torch::TensorOptions().dtype(torch::kLong).device(device)), attend);
  const torch::Tensor h = model::rms_norm(x, norm_, c.rms_norm_eps);  // [nB, d]
  torch::Tensor logits = base_logits(h);                              // [nB, V] U
  torch::Tensor w1_prev;
  if (markov_.enabled()) {
    w1_prev = markov_.w1_rows(on_device(prev_ids));  // [nB, r]
    logits = logits + markov_.block(w1_prev.view({n, B, -1}), h.view({n, B, -1})).view({n * B, -1});
  }
  BlockScores out;
  out.logits = logits.view({n, B, -1});
  if (confidence_.enabled()) out.confidence_logits = confidence_.block(h, w1_prev).view({n, B});
  return out;
}

torch::Tensor DSparkNetwork::draft_backbone(const torch::Tensor& features, const std::vector<CachedBlock>& blocks,
                                            model::KvCache& cache, bool tensor_ops) const {
  const model::ModelConfig& c = config_.backbone;
  const int64_t n_req = static_cast<int64_t>(blocks.size()), B = config_.block_size;
  std::vector<int64_t> context_pos, block_ids, block_pos;
  for (const CachedBlock& blk : blocks) {
    const int64_t cached = cache.length(blk.slot), start = cached + blk.n_context;
    for (int64_t p = cached; p < start; ++p) context_pos.push_back(p);
    for (int64_t k = 0; k < B; ++k) {
      block_ids.push_back(k == 0 ? blk.anchor : config_.mask_token_id);
      block_pos.push_back(start + k);
    }
  }
  if (!tensor_ops) return backbone_rows(features, block_ids, block_pos, context_pos, blocks, cache);
  const torch::Device device = embed_.device();
  torch::Tensor context;  // [n_ctx, hidden]
  if (features.defined() && features.size(0) > 0) context = project_context(features.to(device));
  torch::Tensor x = embed_block(block_ids);  // [nB, hidden]
  const torch::Tensor context_positions = torch::tensor(context_pos, torch::kLong).to(device);
  const torch::Tensor block_positions = torch::tensor(block_pos, torch::kLong).to(device);
  auto attend = [&](int64_t l, const torch::Tensor& q, const torch::Tensor& k_block, const torch::Tensor& v_block,
                    const torch::Tensor& k_context, const torch::Tensor& v_context) {
    torch::Tensor attn = torch::empty({n_req * B, c.n_heads * c.head_dim}, q.options());
    int64_t ctx_begin = 0;
    for (int64_t r = 0; r < n_req; ++r) {
      const int64_t slot = blocks[r].slot, n_ctx = blocks[r].n_context, cached = cache.length(slot);
      torch::Tensor keys = cache.keys(l)[slot];  // [kv, capacity, hd]
      torch::Tensor values = cache.values(l)[slot];
      if (n_ctx > 0) {
        keys.narrow(1, cached, n_ctx).copy_(k_context.narrow(0, ctx_begin, n_ctx).permute({1, 0, 2}));
        values.narrow(1, cached, n_ctx).copy_(v_context.narrow(0, ctx_begin, n_ctx).permute({1, 0, 2}));
      }
      ctx_begin += n_ctx;
      // The block sees every committed position (all strictly before the anchor) and itself.
      const torch::Tensor k_all = torch::cat({keys.narrow(1, 0, cached + n_ctx), k_block.narrow(0, r * B, B).permute({1, 0, 2})}, 1);
      const torch::Tensor v_all = torch::cat({values.narrow(1, 0, cached + n_ctx), v_block.narrow(0, r * B, B).permute({1, 0, 2})}, 1);
      attn.narrow(0, r * B, B).copy_(grouped_attention(q.narrow(0, r * B, B), k_all, v_all, {}));
    }
    return attn;
  };
  return model::rms_norm(layers(x, context, block_positions, context_positions, attend), norm_, c.rms_norm_eps);
}

namespace {

// Rows of an f32 / bf16 / f16 embedding table as f32 (what index_select + to(f32) gives), other
// dtypes through libtorch.
void embedding_rows(const torch::Tensor& table,  // [vocab, hidden], CPU
                    const std::vector<int64_t>& ids,
                    float* out) {  // [ids, hidden]
  const int64_t d = table.size(1);
  auto copy_rows = [&]<class T>(const T* data) {
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < d; ++j) out[static_cast<int64_t>(i) * d + j] = static_cast<float>(data[ids[i] * d + j]);
  };
  if (table.is_contiguous()) {
    switch (table.scalar_type()) {
      case torch::kFloat32: return copy_rows(table.data_ptr<float>());
      case torch::kBFloat16: return copy_rows(table.data_ptr<c10::BFloat16>());
      case torch::kFloat16: return copy_rows(table.data_ptr<c10::Half>());
      default: break;
    }
  }
  const torch::Tensor rows = table.index_select(0, torch::tensor(ids, torch::kLong)).to(torch::kFloat32).contiguous();
  std::copy_n(rows.data_ptr<float>(), rows.numel(), out);
}

}  // namespace

// The CPU drafting path: the same network as above with no libtorch op between the kernels (at a
// dozen rows, rms_norm, the RoPE tables and the embedding lookup through libtorch cost a fifth of
// a drafting call of the default target's drafter).
torch::Tensor DSparkNetwork::backbone_rows(const torch::Tensor& features, const std::vector<int64_t>& block_ids,
                                           const std::vector<int64_t>& block_pos, const std::vector<int64_t>& context_pos,
                                           const std::vector<CachedBlock>& blocks, model::KvCache& cache) const {
  const model::ModelConfig& c = config_.backbone;
  const int64_t d = c.hidden_size, n_ctx = static_cast<int64_t>(context_pos.size());
  const float eps = static_cast<float>(c.rms_norm_eps);
  torch::Tensor x = torch::empty({static_cast<int64_t>(block_ids.size()), d});
  embedding_rows(embed_, block_ids, x.data_ptr<float>());
  torch::Tensor context;  // [n_ctx, hidden]: hidden_norm(fc(features))
  if (n_ctx > 0) {
    DSPARK_ASSERT(features.defined() && features.size(0) == n_ctx);
    context = fc_.forward(features.to(torch::kFloat32)).contiguous();
    float* cp = context.data_ptr<float>();
    kernels::rms_norm_rows(cp, hidden_norm_.data_ptr<float>(), n_ctx, d, eps, cp);
  }
  const auto [cos_c, sin_c] = rope_.cos_sin_rows(context_pos);
  const auto [cos_b, sin_b] = rope_.cos_sin_rows(block_pos);
  layers_rows(x, context, cos_b, sin_b, cos_c, sin_c, blocks, cache);
  float* xp = x.data_ptr<float>();
  kernels::rms_norm_rows(xp, norm_.data_ptr<float>(), x.size(0), d, eps, xp);
  return x;
}

void DSparkNetwork::layers_rows(torch::Tensor& x, const torch::Tensor& context, const torch::Tensor& cos_b,
                                const torch::Tensor& sin_b, const torch::Tensor& cos_c, const torch::Tensor& sin_c,
                                const std::vector<CachedBlock>& blocks, model::KvCache& cache) const {
  const model::ModelConfig& c = config_.backbone;
  const int64_t n_req = static_cast<int64_t>(blocks.size()), B = config_.block_size;
  const int64_t kv_dim = c.n_kv_heads * c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  x = x.contiguous();
  // Blocks go through the layers a few requests at a time, so each group stays on the streaming
  // kernels (<= kSmallBatchRows rows); requests do not interact in the backbone.
  const int64_t per_group = std::max<int64_t>(1, model::kSmallBatchRows / B);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const model::DecoderLayer& layer = layers_[l];
    if (context.defined()) {
      // context_kv, its k_norm and RoPE fused into one kernel over the rows.
      torch::Tensor kv = context_kv_proj(l).forward(context).contiguous();  // [n_ctx, 2 kv_dim]
      float* kv_p = kv.data_ptr<float>();
      kernels::norm_rope_heads(kv_p, kv.size(0), 2 * kv_dim, c.n_kv_heads, c.head_dim,
                               c.qk_norm ? layer.k_norm.data_ptr<float>() : nullptr, eps, cos_c.data_ptr<float>(),
                               sin_c.data_ptr<float>());
      int64_t row = 0;
      for (const CachedBlock& blk : blocks) {
        model::write_kv_rows(cache, l, blk.slot, cache.length(blk.slot), blk.n_context, kv_p + row * 2 * kv_dim,
                             kv_p + row * 2 * kv_dim + kv_dim, 2 * kv_dim);
        row += blk.n_context;
      }
    }
    for (int64_t first = 0; first < n_req; first += per_group) {
      const int64_t n = std::min(per_group, n_req - first);
      // Block queries see every committed position and the whole block, unmasked.
      std::vector<model::RowsSeq> seqs;
      for (int64_t r = first; r < first + n; ++r)
        seqs.push_back({blocks[r].slot, cache.length(blocks[r].slot) + blocks[r].n_context, B, /*causal=*/false});
      torch::Tensor rows = x.narrow(0, first * B, n * B);
      model::decoder_layer_rows(layer, c, cache, l, seqs, cos_b.narrow(0, first * B, n * B),
                                sin_b.narrow(0, first * B, n * B), rows);
    }
  }
}

}  // namespace dspark::draft
