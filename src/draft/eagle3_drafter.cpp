#include "draft/eagle3_drafter.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/safetensors.h"

namespace dspark::draft {

Eagle3Drafter::Eagle3Drafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options)
    : config_(std::move(config)),
      target_(target),
      rope_(config_.backbone),
      cache_(model::KvCacheShape{1, options.max_slots, options.capacity, config_.backbone.n_kv_heads,
                                 config_.backbone.head_dim},
             target.device()),
      slots_(options.max_slots) {
  for (int64_t i = 0; i < options.max_slots; ++i) cache_.allocate();
}

std::unique_ptr<Eagle3Drafter> Eagle3Drafter::load(const std::string& dir, const model::Transformer& target,
                                                   const DrafterLoadOptions& options) {
  DraftConfig config = DraftConfig::load(dir);
  if (config.method != DraftMethod::kEagle3) throw Error(dir + ": not an EAGLE-3 drafter");
  config.check_target(target.config(), dir + "/config.json");
  std::unique_ptr<Eagle3Drafter> drafter(new Eagle3Drafter(std::move(config), target, options));
  drafter->load_weights(dir, options.weight_dtype == model::WeightDType::kBF16 ? torch::kBFloat16 : torch::kFloat32);
  return drafter;
}

void Eagle3Drafter::load_weights(const std::string& dir, torch::ScalarType matrix_dtype) {
  const model::SafetensorsArchive archive = model::SafetensorsArchive::open(dir);
  const model::ModelConfig& c = config_.backbone;
  const int64_t d = c.hidden_size, m = static_cast<int64_t>(config_.target_layer_ids.size());
  const torch::Device device = target_.device();
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape) {
    return model::read_tensor(archive, name, shape, matrix_dtype).to(device);
  };
  auto vector = [&](const std::string& name, int64_t size) {
    return model::read_tensor(archive, name, {size}, torch::kFloat32).to(device);
  };
  embed_ = shared_or_stored(archive, "embed_tokens.weight", target_.embedding(), dir);
  lm_head_ = shared_or_stored(archive, "lm_head.weight", target_.lm_head_weight(), dir);
  fc_.weight = matrix("fc.weight", {d, m * d});
  const std::string p = "layers.0.";
  hidden_norm_ = vector(p + "hidden_norm.weight", d);
  layer_ = model::load_decoder_layer(archive, p, c, matrix_dtype, device, 2 * d);
  norm_ = vector("norm.weight", d);
}

Eagle3Drafter::SlotState& Eagle3Drafter::slot_state(int64_t slot) {
  if (slot < 0 || slot >= static_cast<int64_t>(slots_.size()))
    throw Error("drafter slot " + std::to_string(slot) + " out of range [0, " + std::to_string(slots_.size()) + ")");
  return slots_[slot];
}

void Eagle3Drafter::begin(int64_t slot, const std::vector<int64_t>& prompt_ids, const torch::Tensor& features) {
  SlotState& s = slot_state(slot);
  const int64_t width = config_.backbone.hidden_size * static_cast<int64_t>(config_.target_layer_ids.size());
  if (features.dim() != 2 || features.size(0) != static_cast<int64_t>(prompt_ids.size()) || features.size(1) != width)
    throw Error("drafter begin: features must be [prompt tokens, " + std::to_string(width) + "]");
  cache_.truncate(slot, 0);
  cache_.check_room(slot, features.size(0) + 1);
  s.active = true;
  s.tokens = prompt_ids;
  s.pending = {features.to(torch::kFloat32)};
}

void Eagle3Drafter::commit(int64_t slot, const std::vector<int64_t>& tokens, const torch::Tensor& features) {
  SlotState& s = slot_state(slot);
  if (!s.active) throw Error("drafter commit: slot " + std::to_string(slot) + " has no request");
  if (features.dim() != 2 || features.size(0) != static_cast<int64_t>(tokens.size()))
    throw Error("drafter commit: one feature row per committed token is needed");
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  s.pending.push_back(features.to(torch::kFloat32));
}

void Eagle3Drafter::end(int64_t slot) {
  slot_state(slot) = SlotState{};
  cache_.truncate(slot, 0);
}

torch::Tensor Eagle3Drafter::layer_forward(const Rows& rows) {
  const model::ModelConfig& c = config_.backbone;
  const int64_t n = rows.g.size(0);
  const int64_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim, group = c.n_heads / c.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const torch::Device device = target_.device();
  auto long_opts = torch::TensorOptions().dtype(torch::kLong);

  std::vector<int64_t> positions;
  for (size_t r = 0; r < rows.slots.size(); ++r) {
    cache_.check_room(rows.slots[r], rows.n_rows[r]);
    const int64_t past = cache_.length(rows.slots[r]);
    for (int64_t i = 0; i < rows.n_rows[r]; ++i) positions.push_back(past + i);
  }
  auto [cos, sin] = rope_.cos_sin(torch::tensor(positions, long_opts).to(device));
  torch::Tensor embedded = embed_.index_select(0, torch::tensor(rows.tokens, long_opts).to(device)).to(torch::kFloat32);
  torch::Tensor z = torch::cat({model::rms_norm(embedded, layer_.input_norm, c.rms_norm_eps),
                                model::rms_norm(rows.g, hidden_norm_, c.rms_norm_eps)}, 1);  // [n, 2d]
  torch::Tensor qkv = layer_.qkv.forward(z);
  torch::Tensor q = qkv.narrow(1, 0, q_dim).reshape({n, c.n_heads, c.head_dim});
  torch::Tensor k = qkv.narrow(1, q_dim, kv_dim).reshape({n, c.n_kv_heads, c.head_dim});
  torch::Tensor v = qkv.narrow(1, q_dim + kv_dim, kv_dim).reshape({n, c.n_kv_heads, c.head_dim});
  if (c.qk_norm) {
    q = model::rms_norm(q, layer_.q_norm, c.rms_norm_eps);
    k = model::rms_norm(k, layer_.k_norm, c.rms_norm_eps);
  }
  q = model::Rope::apply(q, cos, sin);
  k = model::Rope::apply(k, cos, sin);

  torch::Tensor attn = torch::empty({n, q_dim}, z.options());
  int64_t begin = 0;
  for (size_t r = 0; r < rows.slots.size(); ++r) {
    const int64_t slot = rows.slots[r], n_new = rows.n_rows[r], past = cache_.length(slot), total = past + n_new;
    torch::Tensor keys = cache_.keys(0)[slot], values = cache_.values(0)[slot];  // [kv, capacity, hd]
    keys.narrow(1, past, n_new).copy_(k.narrow(0, begin, n_new).permute({1, 0, 2}));
    values.narrow(1, past, n_new).copy_(v.narrow(0, begin, n_new).permute({1, 0, 2}));
    torch::Tensor qr = q.narrow(0, begin, n_new).reshape({n_new, c.n_kv_heads, group, c.head_dim}).permute({1, 2, 0, 3});
    torch::Tensor scores = torch::matmul(qr, keys.narrow(1, 0, total).unsqueeze(1).transpose(-1, -2)) * scale;
    torch::Tensor key_pos = torch::arange(total, long_opts.device(device));
    torch::Tensor query_pos = torch::arange(past, total, long_opts.device(device));
    scores = scores.masked_fill(key_pos.unsqueeze(0) > query_pos.unsqueeze(1), -INFINITY);  // causal
    torch::Tensor o = torch::matmul(torch::softmax(scores, -1), values.narrow(1, 0, total).unsqueeze(1));
    attn.narrow(0, begin, n_new).copy_(o.permute({2, 0, 1, 3}).reshape({n_new, q_dim}));
    cache_.commit(slot, n_new);
    begin += n_new;
  }
  return model::layer_output(layer_, c, rows.g, attn);
}

std::vector<DraftBlock> Eagle3Drafter::propose(const std::vector<DraftRequest>& requests) {
  std::vector<DraftBlock> blocks(requests.size());
  if (requests.empty()) return blocks;
  const model::ModelConfig& c = config_.backbone;
  const int64_t n_req = static_cast<int64_t>(requests.size());
  const torch::Device device = target_.device();
  const model::Linear lm_head{lm_head_, {}};

  // 1. Pending verified rows: feature at position t paired with the token at t + 1; the last one
  //    pairs with the anchor.
  Rows pending;
  std::vector<torch::Tensor> features;
  std::vector<int64_t> start(n_req), last_row(n_req);
  for (int64_t r = 0; r < n_req; ++r) {
    SlotState& s = slot_state(requests[r].slot);
    if (!s.active) throw Error("drafter propose: slot " + std::to_string(requests[r].slot) + " has no request");
    start[r] = static_cast<int64_t>(s.tokens.size());
    const int64_t cached = cache_.length(requests[r].slot);
    int64_t n_rows = 0;
    for (const torch::Tensor& t : s.pending) {
      features.push_back(t);
      n_rows += t.size(0);
    }
    DSPARK_ASSERT(cached + n_rows == start[r] && n_rows > 0);
    for (int64_t p = cached; p < start[r]; ++p) pending.tokens.push_back(p + 1 < start[r] ? s.tokens[p + 1] : requests[r].anchor);
    pending.slots.push_back(requests[r].slot);
    pending.n_rows.push_back(n_rows);
    last_row[r] = static_cast<int64_t>(pending.tokens.size()) - 1;
    s.pending.clear();
  }
  pending.g = fc_.forward(torch::cat(features).to(device));
  torch::Tensor out = layer_forward(pending);
  torch::Tensor hidden = out.index_select(0, torch::tensor(last_row, torch::kLong).to(device));  // [R, d]

  // 2. Chain: sample from the current hidden, then feed the sampled token back with that hidden.
  std::vector<int64_t> open;  // requests still drafting
  for (int64_t r = 0; r < n_req; ++r)
    if (requests[r].gamma > 0) open.push_back(r);
  std::vector<std::vector<torch::Tensor>> q_rows(n_req), z_rows(n_req);
  std::vector<int64_t> row_of(n_req);  // row of request r in `hidden`
  for (int64_t r = 0; r < n_req; ++r) row_of[r] = r;
  for (int64_t step = 0; !open.empty(); ++step) {
    torch::Tensor logits = lm_head.forward(model::rms_norm(hidden, norm_, c.rms_norm_eps));  // [rows, vocab]
    Rows chain;
    std::vector<int64_t> chain_rows, still_open;
    for (int64_t r : open) {
      const DraftRequest& req = requests[r];
      torch::Tensor q = sampling::sampling_probs(logits.narrow(0, row_of[r], 1), *req.sampling).cpu().contiguous().view({-1});
      const int64_t token = req.sampling->greedy() ? sampling::argmax(q.data_ptr<float>(), q.size(0))
                                                   : sampling::sample_from_probs(q.data_ptr<float>(), q.size(0), *req.rng);
      blocks[r].tokens.push_back(token);
      q_rows[r].push_back(q);
      if (req.return_logits) z_rows[r].push_back(logits[row_of[r]].cpu());
      if (step + 1 < req.gamma) {  // the next step needs this token's row
        chain.slots.push_back(req.slot);
        chain.n_rows.push_back(1);
        chain.tokens.push_back(token);
        chain_rows.push_back(row_of[r]);
        still_open.push_back(r);
      }
    }
    if (still_open.empty()) break;
    chain.g = hidden.index_select(0, torch::tensor(chain_rows, torch::kLong).to(device));
    hidden = layer_forward(chain);
    for (size_t i = 0; i < still_open.size(); ++i) row_of[still_open[i]] = static_cast<int64_t>(i);
    open = std::move(still_open);
  }
  // Drafted rows were speculative: the cache keeps committed positions only.
  for (int64_t r = 0; r < n_req; ++r) {
    cache_.truncate(requests[r].slot, start[r]);
    if (!q_rows[r].empty()) blocks[r].probs = torch::stack(q_rows[r]);
    if (!z_rows[r].empty()) blocks[r].logits = torch::stack(z_rows[r]);
  }
  return blocks;
}

}  // namespace dspark::draft
