#include "engine/speculative.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace dspark::engine {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int64_t draw_token(const torch::Tensor& logits_row, const sampling::SamplingParams& params, sampling::Rng& rng) {
  if (params.greedy()) {
    torch::Tensor row = logits_row.to(torch::kFloat32).cpu().contiguous();
    return sampling::argmax(row.data_ptr<float>(), row.numel());
  }
  torch::Tensor probs = sampling::sampling_probs(logits_row.unsqueeze(0), params).cpu().contiguous();
  return sampling::sample_from_probs(probs.data_ptr<float>(), probs.size(1), rng);
}

sampling::VerifyOutcome verify_drafts(const torch::Tensor& target_logits, const std::vector<int64_t>& drafts,
                                      const torch::Tensor& draft_probs, const sampling::SamplingParams& params,
                                      sampling::Rng& rng, const SampledVerifier& verifier) {
  const int64_t n = static_cast<int64_t>(drafts.size());
  if (params.greedy()) {
    std::vector<int64_t> argmax(n + 1);
    const torch::Tensor logits = target_logits.to(torch::kFloat32).cpu().contiguous();
    for (int64_t i = 0; i <= n; ++i) argmax[i] = sampling::argmax(logits[i].data_ptr<float>(), logits.size(1));
    return sampling::verify_greedy(argmax, drafts);
  }
  const torch::Tensor p = sampling::sampling_probs(target_logits, params).cpu().contiguous();
  const torch::Tensor q = n > 0 ? draft_probs.narrow(0, 0, n).to(torch::kFloat32).contiguous() : torch::empty({0}, torch::kFloat32);
  const SampledVerifier& verify = verifier ? verifier : SampledVerifier(sampling::verify_sampled);
  return verify(std::span<const float>(p.data_ptr<float>(), p.numel()),
                std::span<const float>(q.data_ptr<float>(), q.numel()), drafts, p.size(1), rng);
}

double SpeculativeStats::acceptance_length() const { return rounds ? double(committed) / double(rounds) : 0.0; }
double SpeculativeStats::drafts_per_round() const { return rounds ? double(proposed) / double(rounds) : 0.0; }

std::vector<double> SpeculativeStats::accept_rate() const {
  std::vector<double> rate;
  for (size_t k = 0; k < proposed_at.size(); ++k)
    rate.push_back(proposed_at[k] ? double(accepted_at[k]) / double(proposed_at[k]) : 0.0);
  return rate;
}

std::vector<double> SpeculativeStats::conditional_accept_rate() const {
  // Rounds that reached slot k (all earlier slots accepted) and proposed it.
  std::vector<double> rate;
  for (size_t k = 0; k < proposed_at.size(); ++k) {
    const double reached = k == 0 ? double(proposed_at[0]) : double(std::min(accepted_at[k - 1], proposed_at[k]));
    rate.push_back(reached > 0 ? double(accepted_at[k]) / reached : 0.0);
  }
  return rate;
}

void SpeculativeStats::merge(const SpeculativeStats& o) {
  rounds += o.rounds;
  committed += o.committed;
  proposed += o.proposed;
  proposed_at.resize(std::max(proposed_at.size(), o.proposed_at.size()));
  accepted_at.resize(proposed_at.size());
  for (size_t k = 0; k < o.proposed_at.size(); ++k) {
    proposed_at[k] += o.proposed_at[k];
    accepted_at[k] += o.accepted_at[k];
  }
  accepted_per_round.insert(accepted_per_round.end(), o.accepted_per_round.begin(), o.accepted_per_round.end());
  confidence_rounds.insert(confidence_rounds.end(), o.confidence_rounds.begin(), o.confidence_rounds.end());
  draft_seconds += o.draft_seconds;
  verify_seconds += o.verify_seconds;
}

SpeculativeResult generate_speculative(model::Transformer& target, draft::Drafter& drafter,
                                       const GenerationRequest& request, const SpeculativeOptions& options,
                                       const TokenCallback& on_token) {
  sampling::check_sampling_params(request.sampling);
  if (request.prompt_ids.empty()) throw Error("generate: the prompt is empty");
  if (request.max_tokens < 0) throw Error("generate: --max-tokens must be >= 0");
  if (options.gamma < 0) throw Error("generate: --gamma must be >= 0");
  const auto t0 = Clock::now();
  const int64_t n_prompt = static_cast<int64_t>(request.prompt_ids.size());
  model::KvCache cache = target.make_cache(1, n_prompt + request.max_tokens + options.gamma + 1);
  const int64_t slot = *cache.allocate();
  constexpr int64_t kDraftSlot = 0;
  sampling::Rng rng(request.sampling.seed);
  const std::vector<int64_t>& layers = drafter.target_layer_ids();

  SpeculativeResult out;
  GenerationResult& result = out.generation;
  SpeculativeStats& stats = out.stats;
  stats.proposed_at.assign(options.gamma, 0);
  stats.accepted_at.assign(options.gamma, 0);
  result.prompt_tokens = n_prompt;
  auto is_stop = [&](int64_t token) {
    return std::find(request.stop_ids.begin(), request.stop_ids.end(), token) != request.stop_ids.end();
  };
  // Emits one token; false once generation is over (stop token or max tokens reached).
  auto emit = [&](int64_t token) {
    if (is_stop(token)) {
      result.finish_reason = "stop";
      return false;
    }
    result.ids.push_back(token);
    if (on_token) on_token(0, token);
    if (static_cast<int64_t>(result.ids.size()) >= request.max_tokens) {
      result.finish_reason = "length";
      return false;
    }
    return true;
  };

  model::ForwardBatch prefill{request.prompt_ids, {{slot, n_prompt}}, {n_prompt - 1}, layers, false};
  model::ForwardOutput first = target.forward(cache, prefill);
  result.prefill_seconds = seconds_since(t0);
  int64_t anchor = draw_token(first.logits[0], request.sampling, rng);
  const bool running = request.max_tokens > 0 && emit(anchor);
  if (request.max_tokens == 0) result.finish_reason = "length";
  if (!running) {
    result.seconds = seconds_since(t0);
    return out;
  }
  drafter.begin(kDraftSlot, request.prompt_ids, first.captured_features());

  for (;;) {
    // Never verify past max_tokens: a round commits at most g + 1 tokens.
    const int64_t remaining = request.max_tokens - static_cast<int64_t>(result.ids.size());
    const int64_t gamma = std::min(options.gamma, remaining - 1);
    auto t_draft = Clock::now();
    draft::DraftBlock block;
    if (gamma > 0)
      block = std::move(drafter.propose({{kDraftSlot, anchor, gamma, options.confidence_threshold, &request.sampling, &rng}})[0]);
    stats.draft_seconds += seconds_since(t_draft);
    const int64_t g = static_cast<int64_t>(block.tokens.size());

    auto t_verify = Clock::now();
    std::vector<int64_t> verify_ids{anchor};
    verify_ids.insert(verify_ids.end(), block.tokens.begin(), block.tokens.end());
    std::vector<int64_t> rows(g + 1);
    for (int64_t i = 0; i <= g; ++i) rows[i] = i;
    const int64_t start = cache.length(slot);
    model::ForwardOutput verified = target.forward(cache, {verify_ids, {{slot, g + 1}}, rows, layers, false});

    const sampling::VerifyOutcome outcome =
        verify_drafts(verified.logits, block.tokens, block.probs, request.sampling, rng, options.verifier);
    stats.verify_seconds += seconds_since(t_verify);

    // Commit: accepted drafts, then the residual / bonus token. An accepted stop token ends the
    // round there, without a bonus (deepspec-spec 5.2 d).
    const int64_t a = outcome.n_accepted;
    ++stats.rounds;
    stats.accepted_per_round.push_back(a);
    if (!block.confidence.empty()) stats.confidence_rounds.push_back({block.confidence, a});
    stats.proposed += g;
    for (int64_t k = 0; k < g; ++k) {
      ++stats.proposed_at[k];
      if (k < a) ++stats.accepted_at[k];
    }
    bool more = true;
    int64_t round_tokens = 0;
    for (int64_t k = 0; k < a && more; ++k, ++round_tokens) more = emit(block.tokens[k]);
    if (more) {
      ++round_tokens;
      more = emit(outcome.next_token);
    }
    stats.committed += round_tokens;
    if (!more) break;

    cache.truncate(slot, start + a + 1);  // anchor + accepted drafts; the next anchor is not yet in
    std::vector<int64_t> committed_ids(verify_ids.begin(), verify_ids.begin() + a + 1);
    torch::Tensor features = layers.empty() ? torch::empty({a + 1, 0}) : verified.captured_features().narrow(0, 0, a + 1);
    drafter.commit(kDraftSlot, committed_ids, features);
    anchor = outcome.next_token;
  }
  drafter.end(kDraftSlot);
  result.seconds = seconds_since(t0);
  return out;
}

}  // namespace dspark::engine
