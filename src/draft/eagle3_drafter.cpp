#include "draft/eagle3_drafter.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "draft/grouped_attention.h"

namespace dspark::draft {

Eagle3Drafter::Eagle3Drafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options,
                             const DrafterWeights& weights)
    : ModelDrafter(config, target, options, /*n_cache_layers=*/1, /*lookahead=*/1),
      layer_(config_, weights) {}

std::unique_ptr<Eagle3Drafter> Eagle3Drafter::load(const std::string& dir, const model::Transformer& target,
                                                   const DrafterLoadOptions& options) {
  DraftConfig config = load_checked_config(dir, target, /*eagle3=*/true);
  const DrafterWeights weights(dir, target, options.weight_dtype, options.bf16_math);
  return std::unique_ptr<Eagle3Drafter>(new Eagle3Drafter(std::move(config), target, options, weights));
}

torch::Tensor Eagle3Drafter::layer_forward(const Rows& rows) {
  const model::ModelConfig& c = config_.backbone;
  const int64_t n = rows.g.size(0);
  const torch::Device device = target_.device();
  auto long_opts = torch::TensorOptions().dtype(torch::kLong);

  std::vector<int64_t> positions;
  for (size_t r = 0; r < rows.slots.size(); ++r) {
    cache_.check_room(rows.slots[r], rows.n_rows[r]);
    const int64_t past = cache_.length(rows.slots[r]);
    for (int64_t i = 0; i < rows.n_rows[r]; ++i) positions.push_back(past + i);
  }
  auto [q, k, v] = layer_.attention_inputs(torch::tensor(rows.tokens, long_opts).to(device), rows.g,
                                           torch::tensor(positions, long_opts).to(device));
  torch::Tensor attn = torch::empty({n, c.n_heads * c.head_dim}, rows.g.options());
  int64_t begin = 0;
  for (size_t r = 0; r < rows.slots.size(); ++r) {
    const int64_t slot = rows.slots[r], n_new = rows.n_rows[r], past = cache_.length(slot), total = past + n_new;
    torch::Tensor keys = cache_.keys(0)[slot], values = cache_.values(0)[slot];  // [kv, capacity, hd]
    keys.narrow(1, past, n_new).copy_(k.narrow(0, begin, n_new).permute({1, 0, 2}));
    values.narrow(1, past, n_new).copy_(v.narrow(0, begin, n_new).permute({1, 0, 2}));
    const torch::Tensor key_pos = torch::arange(total, long_opts.device(device));
    const torch::Tensor query_pos = torch::arange(past, total, long_opts.device(device));
    const torch::Tensor causal = key_pos.unsqueeze(0) <= query_pos.unsqueeze(1);  // [n_new, total]
    attn.narrow(0, begin, n_new)
        .copy_(grouped_attention(q.narrow(0, begin, n_new), keys.narrow(1, 0, total), values.narrow(1, 0, total), causal));
    cache_.commit(slot, n_new);
    begin += n_new;
  }
  return layer_.output(rows.g, attn);
}

std::vector<DraftBlock> Eagle3Drafter::propose(const std::vector<DraftRequest>& requests) {
  std::vector<DraftBlock> blocks(requests.size());
  if (requests.empty()) return blocks;
  const int64_t n_req = static_cast<int64_t>(requests.size());
  const torch::Device device = target_.device();

  // 1. Pending verified rows: feature at position t paired with the token at t + 1; the last one
  //    pairs with the anchor.
  Rows pending;
  std::vector<torch::Tensor> features;
  std::vector<int64_t> start(n_req), last_row(n_req);
  for (int64_t r = 0; r < n_req; ++r) {  // checks first: a bad request changes no slot
    const SlotState& s = active_slot(requests[r].slot);
    DSPARK_ASSERT(cache_.length(requests[r].slot) + s.n_pending() == s.start() && s.n_pending() > 0);
  }
  for (int64_t r = 0; r < n_req; ++r) {
    const int64_t slot = requests[r].slot;
    const SlotState& s = slots_[slot];
    start[r] = s.start();
    const int64_t cached = cache_.length(slot);
    for (int64_t p = cached; p < start[r]; ++p) pending.tokens.push_back(p + 1 < start[r] ? s.tokens[p + 1] : requests[r].anchor);
    pending.slots.push_back(slot);
    pending.n_rows.push_back(start[r] - cached);
    last_row[r] = static_cast<int64_t>(pending.tokens.size()) - 1;
    for (torch::Tensor& t : take_pending(slot)) features.push_back(std::move(t));
  }
  pending.g = layer_.project_features(torch::cat(features).to(device));
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
    torch::Tensor logits = layer_.logits(hidden);  // [rows, vocab]
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
