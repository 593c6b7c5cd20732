#include "draft/dspark_drafter.h"

#include "calibrate/sts_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/error.h"
#include "common/json_file.h"
#include "model/linear.h"

namespace dspark::draft {

DSparkDrafter::DSparkDrafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options,
                             const DrafterWeights& weights)
    : ModelDrafter(config, target, options, config.backbone.n_layers, config.block_size),
      network_(config_, weights) {
  // The CPU rows kernels take one request's block at a time, at most kSmallBatchRows rows of it.
  if (config_.block_size > model::kSmallBatchRows) tensor_ops_ = true;
}

std::unique_ptr<DSparkDrafter> DSparkDrafter::load(const std::string& dir, const model::Transformer& target,
                                                   const DrafterLoadOptions& options) {
  DraftConfig config = load_checked_config(dir, target, /*eagle3=*/false);
  const DrafterWeights weights(dir, target, options.weight_dtype, options.bf16_math);
  std::unique_ptr<DSparkDrafter> drafter(new DSparkDrafter(std::move(config), target, options, weights));
  if (drafter->config_.confidence_head)
    if (const auto temperatures = calibrate::read_sts_temperatures(dir))
      drafter->set_confidence_temperatures(*temperatures);
  return drafter;
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

bool DSparkDrafter::can_propose(int64_t slot) const {
  const int64_t limit = config_.backbone.max_position_embeddings;
  return limit <= 0 || slots_.at(slot).start() + config_.block_size <= limit;
}

torch::Tensor DSparkDrafter::backbone(const std::vector<DraftRequest>& requests) {
  const model::ModelConfig& c = config_.backbone;
  std::vector<CachedBlock> blocks;
  for (const DraftRequest& req : requests) {  // checks first: a bad request changes no slot
    const SlotState& s = active_slot(req.slot);
    const int64_t n_context = s.n_pending();
    DSPARK_ASSERT(cache_.length(req.slot) + n_context == s.start());
    cache_.check_room(req.slot, n_context + config_.block_size);
    if (!can_propose(req.slot))
      throw Error("drafter: a block at position " + std::to_string(s.start()) + " runs past max_position_embeddings (" +
                  std::to_string(c.max_position_embeddings) + ")");
    blocks.push_back({req.slot, req.anchor, n_context});
  }
  std::vector<torch::Tensor> features;  // pending target features, request after request
  for (const DraftRequest& req : requests)
    for (torch::Tensor& t : take_pending(req.slot)) features.push_back(std::move(t));
  const torch::Tensor h = network_.draft_backbone(features.empty() ? torch::Tensor() : torch::cat(features), blocks,
                                                  cache_, tensor_ops_);
  for (const CachedBlock& blk : blocks) cache_.commit(blk.slot, blk.n_context);
  return h;
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
  const torch::Tensor logits_rows = network_.base_logits(hidden);
  const int64_t d = config_.backbone.hidden_size, vocab = logits_rows.size(1);
  const torch::Tensor slot_hidden = hidden.view({n_req, block, d});
  const torch::Tensor slot_logits = logits_rows.view({n_req, block, vocab});
  const torch::Tensor base_logits = tracing_ ? logits_rows.clone() : torch::Tensor();
  // The h_k part of every confidence logit in one product; the W1[x_prev] part is a per-token
  // table (confidence_token_term_), so the serial loop below only adds scalars.
  const ConfidenceHead& confidence = network_.confidence();
  const std::vector<float> confidence_h = confidence.enabled() ? confidence.hidden_terms(hidden) : std::vector<float>();
  const MarkovHeadModule& markov = network_.markov();
  torch::Tensor rnn_state = markov.initial_state(n_req, hidden.options());
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
    if (markov.enabled()) markov.step(logits, prev, slot_hidden.select(1, k), rnn_state);
    const torch::Tensor host_logits = logits.is_cpu() ? logits : logits.cpu().contiguous();
    for (int64_t r = 0; r < n_req; ++r) {
      const DraftRequest& req = requests[r];
      if (!open[r] || k >= req.gamma) continue;
      float c_k = 1.0f;
      if (confidence.enabled()) {
        const float temperature = k < static_cast<int64_t>(confidence_temperatures_.size()) ? confidence_temperatures_[k] : 1.0f;
        c_k = 1.0f / (1.0f + std::exp(-confidence.logit(confidence_h[r * block + k], prev[r]) / temperature));
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
