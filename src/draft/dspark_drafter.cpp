#include "draft/dspark_drafter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/error.h"
#include "common/json_file.h"
#include "model/kernels/linear_small.h"
#include "model/kernels/row_ops.h"
#include "model/safetensors.h"

namespace dspark::draft {

torch::Tensor shared_or_stored(const model::SafetensorsArchive& archive, const std::string& name,
                               const torch::Tensor& target_tensor, const std::string& dir) {
  if (!archive.contains(name)) return target_tensor;
  const model::TensorView& view = archive.get(name);
  const torch::ScalarType stored_dtype = view.dtype == model::DType::kF32 ? torch::kFloat32 : torch::kBFloat16;
  const torch::Tensor stored = model::read_tensor(archive, name, {target_tensor.size(0), target_tensor.size(1)}, stored_dtype);
  const torch::Tensor target_cpu = target_tensor.to(torch::kCPU);
  if (target_cpu.scalar_type() == stored_dtype && torch::equal(stored, target_cpu)) return target_tensor;
  if (torch::equal(stored, target_cpu.to(stored_dtype))) return stored.to(target_tensor.device());
  throw Error(dir + ": " + name + " differs from the target's (this drafter was trained for another target)");
}

DSparkDrafter::DSparkDrafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options)
    : config_(std::move(config)),
      target_(target),
      rope_(config_.backbone),
      cache_(model::KvCacheShape{config_.backbone.n_layers, options.max_slots, options.capacity,
                                 config_.backbone.n_kv_heads, config_.backbone.head_dim},
             target.device()),
      slots_(options.max_slots) {
  for (int64_t i = 0; i < options.max_slots; ++i) cache_.allocate();
}

std::unique_ptr<DSparkDrafter> DSparkDrafter::load(const std::string& dir, const model::Transformer& target,
                                                   const DrafterLoadOptions& options) {
  DraftConfig config = DraftConfig::load(dir);
  if (config.method == DraftMethod::kEagle3) throw Error(dir + ": an EAGLE-3 drafter, not DSpark/DFlash");
  config.check_target(target.config(), dir + "/config.json");
  std::unique_ptr<DSparkDrafter> drafter(new DSparkDrafter(std::move(config), target, options));
  drafter->load_weights(dir, options.weight_dtype == model::WeightDType::kBF16 ? torch::kBFloat16 : torch::kFloat32);
  const std::filesystem::path sts = std::filesystem::path(dir) / kStsFile;
  if (drafter->config_.confidence_head && std::filesystem::exists(sts)) {
    const nlohmann::json j = read_json_file(sts);
    try {
      drafter->set_confidence_temperatures(j.at("temperatures").get<std::vector<double>>());
    } catch (const nlohmann::json::exception& e) {
      throw Error(sts.string() + ": " + e.what());
    }
  }
  return drafter;
}

void DSparkDrafter::load_weights(const std::string& dir, torch::ScalarType matrix_dtype) {
  const model::SafetensorsArchive archive = model::SafetensorsArchive::open(dir);
  const model::ModelConfig& c = config_.backbone;
  const int64_t d = c.hidden_size, m = static_cast<int64_t>(config_.target_layer_ids.size()), r = config_.markov_rank;
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape) {
    return model::read_tensor(archive, name, shape, matrix_dtype).to(target_.device());
  };
  auto vector = [&](const std::string& name, std::vector<int64_t> shape) {
    return model::read_tensor(archive, name, shape, torch::kFloat32).to(target_.device());
  };
  embed_ = shared_or_stored(archive, "embed_tokens.weight", target_.embedding(), dir);
  lm_head_ = shared_or_stored(archive, "lm_head.weight", target_.lm_head_weight(), dir);
  fc_.weight = matrix("fc.weight", {d, m * d});
  hidden_norm_ = vector("hidden_norm.weight", {d});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    layers_.push_back(model::load_decoder_layer(archive, "layers." + std::to_string(l) + ".", c, matrix_dtype,
                                                target_.device()));
  }
  norm_ = vector("norm.weight", {d});
  if (r > 0) {
    markov_w1_ = vector("markov_head.markov_w1.weight", {c.vocab_size, r}).contiguous();
    markov_w2_.weight = matrix("markov_head.markov_w2.weight", {c.vocab_size, r});
    markov_w1_is_bf16_ = torch::equal(markov_w1_, markov_w1_.to(torch::kBFloat16).to(torch::kFloat32));
    if (config_.markov_head == MarkovHead::kRnn) {
      rnn_joint_.weight = matrix("markov_head.joint_proj.weight", {3 * r, 2 * r + d});
      rnn_joint_.bias = vector("markov_head.joint_proj.bias", {3 * r});
    }
  }
  if (config_.confidence_head) {
    const int64_t width = config_.confidence_with_markov ? d + r : d;
    confidence_w_ = vector("confidence_head.proj.weight", {1, width}).view({width});
    confidence_b_ = vector("confidence_head.proj.bias", {1}).item<float>();
    if (config_.confidence_with_markov) {
      torch::Tensor table = markov_w1_.mv(confidence_w_.narrow(0, d, r)).cpu().contiguous();  // [vocab]
      confidence_token_term_.assign(table.data_ptr<float>(), table.data_ptr<float>() + table.numel());
    }
  }
}

void DSparkDrafter::set_confidence_temperatures(const std::vector<double>& temperatures) {
  if (static_cast<int64_t>(temperatures.size()) > config_.block_size)
    throw Error("STS: " + std::to_string(temperatures.size()) + " temperatures for a block of " +
                std::to_string(config_.block_size));
  confidence_temperatures_.clear();
  for (double t : temperatures) {
    if (!(t > 0) || !std::isfinite(t)) throw Error("STS: temperatures must be positive and finite");
    confidence_temperatures_.push_back(static_cast<float>(t));
  }
}

DSparkDrafter::SlotState& DSparkDrafter::slot_state(int64_t slot) {
  if (slot < 0 || slot >= static_cast<int64_t>(slots_.size()))
    throw Error("drafter slot " + std::to_string(slot) + " out of range [0, " + std::to_string(slots_.size()) + ")");
  return slots_[slot];
}

void DSparkDrafter::begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) {
  SlotState& s = slot_state(slot);
  const int64_t width = config_.backbone.hidden_size * static_cast<int64_t>(config_.target_layer_ids.size());
  if (features.dim() != 2 || features.size(0) != static_cast<int64_t>(prompt_ids.size()) || features.size(1) != width)
    throw Error("drafter begin: features must be [prompt tokens, " + std::to_string(width) + "]");
  cache_.truncate(slot, 0);
  cache_.check_room(slot, features.size(0) + config_.block_size);
  s.active = true;
  s.start = static_cast<int64_t>(prompt_ids.size());
  s.pending = {features.to(torch::kFloat32)};
}

void DSparkDrafter::commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) {
  SlotState& s = slot_state(slot);
  if (!s.active) throw Error("drafter commit: slot " + std::to_string(slot) + " has no request");
  if (features.dim() != 2 || features.size(0) != static_cast<int64_t>(tokens.size()))
    throw Error("drafter commit: one feature row per committed token is needed");
  s.pending.push_back(features.to(torch::kFloat32));
  s.start += static_cast<int64_t>(tokens.size());
}

void DSparkDrafter::end(int64_t slot) {
  SlotState& s = slot_state(slot);
  s = SlotState{};
  cache_.truncate(slot, 0);
}

torch::Tensor DSparkDrafter::backbone(const std::vector<DraftRequest>& requests) {
  const model::ModelConfig& c = config_.backbone;
  const int64_t n_req = static_cast<int64_t>(requests.size()), block = config_.block_size;
  auto long_opts = torch::TensorOptions().dtype(torch::kLong);

  // Context rows (pending target features) and block rows, with their positions.
  std::vector<torch::Tensor> context_parts;
  std::vector<int64_t> n_context(n_req), context_pos, block_ids, block_pos;
  for (int64_t r = 0; r < n_req; ++r) {
    SlotState& s = slot_state(requests[r].slot);
    if (!s.active) throw Error("drafter propose: slot " + std::to_string(requests[r].slot) + " has no request");
    const int64_t cached = cache_.length(requests[r].slot);
    for (const torch::Tensor& t : s.pending) {
      context_parts.push_back(t);
      n_context[r] += t.size(0);
    }
    DSPARK_ASSERT(cached + n_context[r] == s.start);
    cache_.check_room(requests[r].slot, n_context[r] + block);
    if (s.start + block > c.max_position_embeddings && c.max_position_embeddings > 0)
      throw Error("drafter: position " + std::to_string(s.start + block) + " beyond max_position_embeddings");
    for (int64_t p = cached; p < s.start; ++p) context_pos.push_back(p);
    for (int64_t k = 0; k < block; ++k) {
      block_ids.push_back(k == 0 ? requests[r].anchor : config_.mask_token_id);
      block_pos.push_back(s.start + k);
    }
  }
  const torch::Device device = target_.device();
  torch::Tensor context;  // [n_ctx, hidden]: hidden_norm(fc(features)), shared by every layer
  if (!context_parts.empty())
    context = model::rms_norm(fc_.forward(torch::cat(context_parts).to(device)), hidden_norm_, c.rms_norm_eps);
  torch::Tensor x = embed_.index_select(0, torch::tensor(block_ids, long_opts).to(device)).to(torch::kFloat32);
  const torch::Tensor context_positions = torch::tensor(context_pos, long_opts).to(device);
  const torch::Tensor block_positions = torch::tensor(block_pos, long_opts).to(device);
  if (device.is_cpu())
    layers_rows(requests, n_context, context, context_positions, block_positions, x);
  else
    layers_tensor_ops(requests, n_context, context, context_positions, block_positions, x);
  for (int64_t r = 0; r < n_req; ++r) {
    cache_.commit(requests[r].slot, n_context[r]);
    slots_[requests[r].slot].pending.clear();
  }
  return model::rms_norm(x, norm_, c.rms_norm_eps);
}

void DSparkDrafter::layers_rows(const std::vector<DraftRequest>& requests, const std::vector<int64_t>& n_context,
                                const torch::Tensor& context, const torch::Tensor& context_pos,
                                const torch::Tensor& block_pos, torch::Tensor& x) {
  const model::ModelConfig& c = config_.backbone;
  const int64_t n_req = static_cast<int64_t>(requests.size()), block = config_.block_size;
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  auto cos_sin_rows = [&](const torch::Tensor& positions) {
    auto [cos, sin] = rope_.cos_sin(positions);
    return std::pair{cos.view({-1, c.head_dim}).contiguous(), sin.view({-1, c.head_dim}).contiguous()};
  };
  const auto [cos_c, sin_c] = cos_sin_rows(context_pos);
  const auto [cos_b, sin_b] = cos_sin_rows(block_pos);
  x = x.contiguous();
  // Blocks go through the layers a few requests at a time, so each group stays on the streaming
  // kernels (<= kSmallBatchRows rows); requests do not interact in the backbone.
  const int64_t per_group = std::max<int64_t>(1, model::kSmallBatchRows / block);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const model::DecoderLayer& layer = layers_[l];
    if (context.defined()) {
      // Context rows enter as keys/values only: k_proj / v_proj on the projected features (no
      // input norm), k_norm on the keys, RoPE at their own positions.
      const model::Linear kv_proj{layer.qkv.weight.narrow(0, q_dim, 2 * kv_dim),
                                  layer.qkv.bias.defined() ? layer.qkv.bias.narrow(0, q_dim, 2 * kv_dim) : torch::Tensor()};
      torch::Tensor kv = kv_proj.forward(context).contiguous();  // [n_ctx, 2 kv_dim]
      float* kv_p = kv.data_ptr<float>();
      kernels::norm_rope_heads(kv_p, kv.size(0), 2 * kv_dim, c.n_kv_heads, c.head_dim,
                               c.qk_norm ? layer.k_norm.data_ptr<float>() : nullptr, eps, cos_c.data_ptr<float>(),
                               sin_c.data_ptr<float>());
      int64_t row = 0;
      for (int64_t r = 0; r < n_req; ++r) {
        const int64_t slot = requests[r].slot;
        model::write_kv_rows(cache_, l, slot, cache_.length(slot), n_context[r], kv_p + row * 2 * kv_dim,
                             kv_p + row * 2 * kv_dim + kv_dim, 2 * kv_dim);
        row += n_context[r];
      }
    }
    for (int64_t first = 0; first < n_req; first += per_group) {
      const int64_t n = std::min(per_group, n_req - first);
      // Block queries see every committed position (all strictly before the anchor) and the
      // whole block, unmasked; the block's own keys land past the committed length and are
      // overwritten by the next call.
      std::vector<model::RowsSeq> seqs;
      for (int64_t r = first; r < first + n; ++r) {
        const int64_t slot = requests[r].slot;
        seqs.push_back({slot, cache_.length(slot) + n_context[r], block, /*causal=*/false});
      }
      torch::Tensor rows = x.narrow(0, first * block, n * block);
      model::decoder_layer_rows(layer, c, cache_, l, seqs, cos_b.narrow(0, first * block, n * block),
                                sin_b.narrow(0, first * block, n * block), rows);
    }
  }
}

void DSparkDrafter::layers_tensor_ops(const std::vector<DraftRequest>& requests, const std::vector<int64_t>& n_context,
                                      const torch::Tensor& context, const torch::Tensor& context_pos,
                                      const torch::Tensor& block_pos, torch::Tensor& x) {
  const model::ModelConfig& c = config_.backbone;
  const int64_t n_req = static_cast<int64_t>(requests.size()), block = config_.block_size;
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim, group = c.n_heads / c.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  auto [cos_c, sin_c] = rope_.cos_sin(context_pos);
  auto [cos_b, sin_b] = rope_.cos_sin(block_pos);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const model::DecoderLayer& layer = layers_[l];
    auto [q, k_block, v_block] = model::attention_inputs(layer, c, x, cos_b, sin_b);  // [R*B, heads, hd]
    torch::Tensor k_ctx, v_ctx;
    if (context.defined()) {
      model::Linear kv{layer.qkv.weight.narrow(0, q_dim, 2 * kv_dim),
                       layer.qkv.bias.defined() ? layer.qkv.bias.narrow(0, q_dim, 2 * kv_dim) : torch::Tensor()};
      torch::Tensor kv_rows = kv.forward(context);
      k_ctx = kv_rows.narrow(1, 0, kv_dim).reshape({-1, c.n_kv_heads, c.head_dim});
      v_ctx = kv_rows.narrow(1, kv_dim, kv_dim).reshape({-1, c.n_kv_heads, c.head_dim});
      if (c.qk_norm) k_ctx = model::rms_norm(k_ctx, layer.k_norm, c.rms_norm_eps);
      k_ctx = model::Rope::apply(k_ctx, cos_c, sin_c);
    }
    torch::Tensor attn = torch::empty({n_req * block, q_dim}, x.options());
    int64_t ctx_begin = 0;
    for (int64_t r = 0; r < n_req; ++r) {
      const int64_t slot = requests[r].slot, cached = cache_.length(slot), start = cached + n_context[r];
      torch::Tensor keys = cache_.keys(l)[slot];      // [kv, capacity, hd]
      torch::Tensor values = cache_.values(l)[slot];
      if (n_context[r] > 0) {
        keys.narrow(1, cached, n_context[r]).copy_(k_ctx.narrow(0, ctx_begin, n_context[r]).permute({1, 0, 2}));
        values.narrow(1, cached, n_context[r]).copy_(v_ctx.narrow(0, ctx_begin, n_context[r]).permute({1, 0, 2}));
      }
      ctx_begin += n_context[r];
      torch::Tensor k_all = torch::cat({keys.narrow(1, 0, start), k_block.narrow(0, r * block, block).permute({1, 0, 2})}, 1);
      torch::Tensor v_all = torch::cat({values.narrow(1, 0, start), v_block.narrow(0, r * block, block).permute({1, 0, 2})}, 1);
      torch::Tensor qr = q.narrow(0, r * block, block).reshape({block, c.n_kv_heads, group, c.head_dim}).permute({1, 2, 0, 3});
      torch::Tensor scores = torch::matmul(qr, k_all.unsqueeze(1).transpose(-1, -2)) * scale;  // [kv, g, B, T]
      torch::Tensor o = torch::matmul(torch::softmax(scores, -1), v_all.unsqueeze(1));          // [kv, g, B, hd]
      attn.narrow(0, r * block, block).copy_(o.permute({2, 0, 1, 3}).reshape({block, q_dim}));
    }
    x = model::layer_output(layer, c, x, attn);
  }
}
torch::Tensor DSparkDrafter::markov_bias(const torch::Tensor& w1, const torch::Tensor& hidden,
                                         torch::Tensor& rnn_state) const {
  if (config_.markov_head != MarkovHead::kRnn) return markov_w2_.forward(w1);  // W2 W1[x_prev]
  const int64_t r = config_.markov_rank;
  torch::Tensor gco = rnn_joint_.forward(torch::cat({rnn_state, w1, hidden}, 1));  // [n, 3r]
  torch::Tensor gate = torch::sigmoid(gco.narrow(1, 0, r));
  rnn_state = gate * rnn_state + (1 - gate) * torch::tanh(gco.narrow(1, r, r));
  return markov_w2_.forward(torch::tanh(gco.narrow(1, 2 * r, r)));
}

void DSparkDrafter::add_markov_bias(torch::Tensor logits, const std::vector<int64_t>& prev,
                                    const torch::Tensor& hidden, torch::Tensor& rnn_state) const {
  const int64_t n = logits.size(0), vocab = logits.size(1), r = config_.markov_rank;
  if (config_.markov_head == MarkovHead::kVanilla && logits.is_cpu() && logits.stride(1) == 1) {
    // The serial loop runs this once per slot, so on the CPU it skips libtorch's per-op dispatch:
    // gather the W1 rows, then one streaming W2 product added into the logits rows in place. W1
    // rows that are bf16 numbers (checkpoints are stored in bf16) let it use bf16 dot
    // instructions exactly.
    std::vector<float> w1_rows(n * r);
    const float* w1 = markov_w1_.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) std::copy_n(w1 + prev[i] * r, r, w1_rows.data() + i * r);
    const torch::Tensor& w2 = markov_w2_.weight;
    kernels::linear_small_accumulate(
        w1_rows.data(), n, r, w2.data_ptr(),
        w2.scalar_type() == torch::kBFloat16 ? kernels::WeightDType::kBF16 : kernels::WeightDType::kF32, vocab,
        logits.data_ptr<float>(), logits.stride(0),
        markov_w1_is_bf16_ ? kernels::Bf16Math::kDotBf16 : kernels::Bf16Math::kExact);
    return;
  }
  torch::Tensor prev_ids = torch::tensor(prev, torch::kLong).to(markov_w1_.device());
  logits.add_(markov_bias(markov_w1_.index_select(0, prev_ids), hidden, rnn_state));
}

std::vector<DraftBlock> DSparkDrafter::propose(const std::vector<DraftRequest>& requests) {
  traces_.clear();
  std::vector<DraftBlock> blocks(requests.size());
  if (requests.empty()) return blocks;
  const int64_t n_req = static_cast<int64_t>(requests.size()), block = config_.block_size;
  for (const DraftRequest& req : requests)
    if (req.gamma < 0 || req.gamma > block)
      throw Error("gamma " + std::to_string(req.gamma) + " exceeds this drafter's block size " + std::to_string(block));

  const torch::Tensor hidden = backbone(requests);  // [R*B, hidden]
  // [R*B, vocab]: U, and in the loop below slot k's rows become Z_k.
  const torch::Tensor logits_rows = model::Linear{lm_head_, {}}.forward(hidden);
  const int64_t d = config_.backbone.hidden_size, vocab = logits_rows.size(1);
  const torch::Tensor slot_hidden = hidden.view({n_req, block, d});
  const torch::Tensor slot_logits = logits_rows.view({n_req, block, vocab});
  const torch::Tensor base_logits = tracing_ ? logits_rows.clone() : torch::Tensor();
  // The h_k part of every confidence logit in one product; the W1[x_prev] part is a per-token
  // table (confidence_token_term_), so the serial loop below only adds scalars.
  std::vector<float> confidence_h;
  if (config_.confidence_head) {
    torch::Tensor part = hidden.mv(confidence_w_.narrow(0, 0, d)).cpu().contiguous();
    confidence_h.assign(part.data_ptr<float>(), part.data_ptr<float>() + part.numel());
  }
  const bool markov = config_.markov_rank > 0;
  torch::Tensor rnn_state = markov ? torch::zeros({n_req, config_.markov_rank}, hidden.options()) : torch::Tensor();
  std::vector<int64_t> prev(n_req);
  std::vector<bool> open(n_req, true);
  std::vector<torch::Tensor> probs(n_req);  // [gamma, vocab] each: q_k rows as they are drawn
  std::vector<std::vector<torch::Tensor>> z_rows(n_req);
  for (int64_t r = 0; r < n_req; ++r) {
    prev[r] = requests[r].anchor;
    if (requests[r].gamma > 0) probs[r] = torch::empty({requests[r].gamma, vocab});
  }

  for (int64_t k = 0; k < block; ++k) {
    const torch::Tensor logits = slot_logits.select(1, k);  // [R, vocab] U_k, then Z_k
    if (markov) add_markov_bias(logits, prev, slot_hidden.select(1, k), rnn_state);
    const torch::Tensor host_logits = logits.is_cpu() ? logits : logits.cpu().contiguous();
    for (int64_t r = 0; r < n_req; ++r) {
      const DraftRequest& req = requests[r];
      if (!open[r] || k >= req.gamma) continue;
      float c_k = 1.0f;
      if (config_.confidence_head) {
        const float token_term = confidence_token_term_.empty() ? 0.0f : confidence_token_term_[prev[r]];
        const float temperature = k < static_cast<int64_t>(confidence_temperatures_.size()) ? confidence_temperatures_[k] : 1.0f;
        c_k = 1.0f / (1.0f + std::exp(-(confidence_h[r * block + k] + token_term + confidence_b_) / temperature));
        // c_k depends on x_{k-1} only, so cutting here never looks at the token it would judge.
        if (c_k < req.confidence_threshold) {
          open[r] = false;
          continue;
        }
        blocks[r].confidence.push_back(c_k);
      }
      float* q = probs[r].data_ptr<float>() + static_cast<int64_t>(blocks[r].tokens.size()) * vocab;
      sampling::sampling_probs_row(host_logits.data_ptr<float>() + r * host_logits.stride(0), vocab, *req.sampling, q);
      const int64_t token = req.sampling->greedy() ? sampling::argmax(q, vocab) : sampling::sample_from_probs(q, vocab, *req.rng);
      blocks[r].tokens.push_back(token);
      if (req.return_logits) z_rows[r].push_back(host_logits[r].clone());
      prev[r] = token;
    }
  }
  for (int64_t r = 0; r < n_req; ++r) {
    if (!blocks[r].tokens.empty()) blocks[r].probs = probs[r].narrow(0, 0, static_cast<int64_t>(blocks[r].tokens.size()));
    if (!z_rows[r].empty()) blocks[r].logits = torch::stack(z_rows[r]);
    if (tracing_) {
      BlockTrace trace;
      trace.hidden = hidden.narrow(0, r * block, block).cpu();
      trace.base_logits = base_logits.narrow(0, r * block, block).cpu();
      traces_.push_back(std::move(trace));
    }
  }
  return blocks;
}

}  // namespace dspark::draft
