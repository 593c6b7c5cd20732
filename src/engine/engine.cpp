#include "engine/engine.h"

#include <algorithm>

#include "common/error.h"

namespace dspark::engine {

namespace {

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The seed of a request's probe stream: its seed offset and scrambled, so it is independent of the
// request's own stream and of its neighbours' (seed + 1, seed + 2, ...).
uint64_t probe_stream_seed(uint64_t seed) { return sampling::mix64(seed + 0x632BE59BD9B4E019ull); }

schedule::SpsSource sps_source(const StepCost* cost, const StepCostDrift* drift) {
  if (drift) return [drift](int64_t n_requests) { return drift->sps_for(n_requests); };
  if (cost) return [cost](int64_t n_requests) { return cost->sps_for(n_requests); };
  return {};
}

}  // namespace

Engine::Engine(model::Transformer& target, draft::Drafter* drafter, EngineOptions options)
    : target_(target),
      drafter_(options.schedule == schedule::ScheduleKind::kNone ? nullptr : drafter),
      options_(std::move(options)),
      limits_{target.config().vocab_size, context_limit(target.config(), options_.max_context),
              static_cast<bool>(options_.detokenize)},
      cache_(target.make_cache(options_.max_concurrency, limits_.max_context + options_.gamma + 2)),
      drift_(options_.step_cost && options_.rescale_step_cost ? std::make_unique<StepCostDrift>(*options_.step_cost)
                                                               : nullptr),
      policy_(drafter_ ? options_.schedule : schedule::ScheduleKind::kNone, options_.threshold,
              sps_source(options_.step_cost, drift_.get())) {
  if (options_.max_concurrency < 1) throw Error("engine: --concurrency must be >= 1");
  if (options_.gamma < 0) throw Error("engine: --gamma must be >= 0");
  if (options_.prefill_chunk < 1) throw Error("engine: the prefill chunk must be >= 1");
  if (drafter_ && drafter_->max_slots() < options_.max_concurrency)
    throw Error("engine: the drafter has " + std::to_string(drafter_->max_slots()) + " slots, fewer than --concurrency " +
                std::to_string(options_.max_concurrency));
  if (drafter_ && schedule::needs_sps_table(options_.schedule)) {
    const int64_t needed = options_.max_concurrency * (options_.gamma + 1);
    if (static_cast<int64_t>(options_.step_cost->verify_seconds.size()) < needed)
      throw Error("engine: the step-cost profile covers " + std::to_string(options_.step_cost->verify_seconds.size()) +
                  " tokens per step, fewer than concurrency x (gamma + 1) = " + std::to_string(needed) +
                  " (run `dspark profile` with a larger --max-requests)");
  }
  for (int64_t s = options_.max_concurrency - 1; s >= 0; --s) free_draft_slots_.push_back(s);
}

int64_t Engine::submit(EngineRequest request) {
  check_request(request, limits_);
  Active a;
  a.outcome.id = next_id_++;
  a.rng = sampling::Rng(request.sampling.seed);
  a.rng.set_counter(request.first_draw);
  a.probe_rng = sampling::Rng(probe_stream_seed(request.sampling.seed));
  a.outcome.stats.prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
  a.request = std::move(request);
  a.submitted = Clock::now();
  waiting_.push_back(std::move(a));
  return waiting_.back().outcome.id;
}

void Engine::cancel(int64_t id) {
  for (Active& a : waiting_)
    if (a.outcome.id == id) a.cancelled = true;
  for (Active& a : active_)
    if (a.outcome.id == id) a.cancelled = true;
}

double Engine::since_submit(const Active& a) const { return seconds_between(a.submitted, Clock::now()); }

void Engine::admit() {
  while (!waiting_.empty() && static_cast<int64_t>(active_.size()) < options_.max_concurrency) {
    Active a = std::move(waiting_.front());
    waiting_.pop_front();
    a.kv_slot = *cache_.allocate();
    if (drafter_ && a.request.speculate) {
      a.draft_slot = free_draft_slots_.back();
      free_draft_slots_.pop_back();
    }
    a.outcome.stats.queued_seconds = since_submit(a);
    active_.push_back(std::move(a));
  }
}

void Engine::finish(Active& a, const std::string& reason) {
  a.done = true;
  a.outcome.finish_reason = reason;
  a.outcome.stats.seconds = since_submit(a);
}

template <class F>
void Engine::for_request(Active& a, F&& part) {
  if (!options_.fail_requests_alone) return part();
  try {
    part();
  } catch (const Error& e) {
    a.outcome.text = e.what();
    a.text_cut = true;  // the message stays the text
    finish(a, "error");
  }
}

void Engine::emit(Active& a, int64_t token) {
  if (a.done) return;
  const EngineRequest& r = a.request;
  if (std::find(r.stop_ids.begin(), r.stop_ids.end(), token) != r.stop_ids.end()) return finish(a, "stop");
  std::vector<int64_t>& ids = a.outcome.ids;
  ids.push_back(token);
  a.outcome.stats.generated_tokens = static_cast<int64_t>(ids.size());
  if (ids.size() == 1) a.outcome.stats.first_token_seconds = since_submit(a);
  if (r.on_token && !r.on_token(token)) return finish(a, "cancelled");
  if (!r.stop_strings.empty()) {
    const std::string text = options_.detokenize(ids);
    for (const std::string& stop : r.stop_strings)
      if (const size_t at = text.find(stop); at != std::string::npos) {
        a.outcome.text = text.substr(0, at);
        a.text_cut = true;
        return finish(a, "stop");
      }
  }
  if (static_cast<int64_t>(ids.size()) >= r.max_tokens) finish(a, "length");
}

int64_t Engine::gamma_of(const Active& a) const {
  if (a.draft_slot < 0 || !drafter_->can_propose(a.draft_slot)) return 0;
  int64_t gamma = a.request.gamma >= 0 ? std::min(a.request.gamma, options_.gamma) : options_.gamma;
  if (options_.schedule == schedule::ScheduleKind::kMtp1) gamma = std::min<int64_t>(gamma, 1);
  if (drafter_->max_gamma() > 0) gamma = std::min(gamma, drafter_->max_gamma());
  // A step commits at most gamma + 1 tokens: never draft past max_tokens.
  const int64_t remaining = a.request.max_tokens - static_cast<int64_t>(a.outcome.ids.size());
  return std::max<int64_t>(0, std::min(gamma, remaining - 1));
}

std::vector<RequestOutcome> Engine::finish_cancelled_waiting() {
  std::vector<RequestOutcome> finished;
  for (auto it = waiting_.begin(); it != waiting_.end();)
    if (it->cancelled) {
      finish(*it, "cancelled");
      finished.push_back(std::move(it->outcome));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  return finished;
}

// One drafting call for every decoding request the plan has draft and that speculates; blocks
// [n_decoding], empty for the others.
std::vector<draft::DraftBlock> Engine::draft(const std::vector<Active*>& decoding, const schedule::StepPlan& plan) {
  std::vector<draft::DraftBlock> blocks(decoding.size());
  if (plan.drafting == schedule::Drafting::kOff) return blocks;
  ++stats_.drafting_steps;
  std::vector<draft::DraftRequest> requests;
  std::vector<size_t> which;
  for (size_t i = 0; i < decoding.size(); ++i) {
    if (!plan.drafts[i]) continue;
    Active& a = *decoding[i];
    const int64_t gamma = gamma_of(a);
    if (gamma <= 0) continue;
    sampling::Rng* rng = plan.drafting == schedule::Drafting::kProbe ? &a.probe_rng : &a.rng;
    requests.push_back({a.draft_slot, a.anchor, gamma, a.request.confidence_threshold, &a.request.sampling, rng});
    which.push_back(i);
  }
  if (requests.empty()) return blocks;
  std::vector<draft::DraftBlock> proposed = drafter_->propose(requests);
  for (size_t j = 0; j < which.size(); ++j) blocks[which[j]] = std::move(proposed[j]);
  return blocks;
}

// The step's ragged forward: each decoding request's anchor and its l_r drafts, then prompt chunks
// of the prefilling requests within the step's prefill budget.
model::ForwardBatch Engine::build_forward(const std::vector<Active*>& decoding, const std::vector<Active*>& prefilling,
                                          const std::vector<draft::DraftBlock>& blocks,
                                          const std::vector<int64_t>& lengths, std::vector<VerifyRows>& rows,
                                          std::vector<PrefillChunk>& chunks) const {
  model::ForwardBatch batch;
  if (drafter_) batch.capture_layers = drafter_->target_layer_ids();
  rows.resize(decoding.size());
  for (size_t i = 0; i < decoding.size(); ++i) {
    const Active& a = *decoding[i];
    const int64_t l = lengths[i];
    rows[i] = {static_cast<int64_t>(batch.token_ids.size()), static_cast<int64_t>(batch.logit_rows.size()),
               cache_.length(a.kv_slot)};
    batch.token_ids.push_back(a.anchor);
    batch.token_ids.insert(batch.token_ids.end(), blocks[i].tokens.begin(), blocks[i].tokens.begin() + l);
    batch.seqs.push_back({a.kv_slot, l + 1});
    for (int64_t k = 0; k <= l; ++k) batch.logit_rows.push_back(rows[i].first_row + k);
  }
  int64_t budget = options_.prefill_chunk;
  for (Active* a : prefilling) {
    if (budget <= 0) break;
    const std::vector<int64_t>& prompt = a->request.prompt_ids;
    const int64_t n_prompt = static_cast<int64_t>(prompt.size());
    const int64_t n = std::min(budget, n_prompt - a->prefilled);
    const int64_t row = static_cast<int64_t>(batch.token_ids.size());
    batch.token_ids.insert(batch.token_ids.end(), prompt.begin() + a->prefilled, prompt.begin() + a->prefilled + n);
    batch.seqs.push_back({a->kv_slot, n});
    int64_t logit = -1;
    if (a->prefilled + n == n_prompt) {
      logit = static_cast<int64_t>(batch.logit_rows.size());
      batch.logit_rows.push_back(row + n - 1);
    }
    chunks.push_back({a, row, n, logit});
    budget -= n;
  }
  return batch;
}

// Rejection sampling (or greedy matching) of one request's l drafts, then the commit: tokens
// emitted, target KV truncated to anchor + accepted drafts, the drafter told what was committed.
void Engine::verify_and_commit(Active& a, const draft::DraftBlock& block, int64_t l, const VerifyRows& rows,
                               const model::ForwardOutput& out, const torch::Tensor& features) {
  const std::span<const int64_t> drafts(block.tokens.data(), static_cast<size_t>(l));
  const sampling::VerifyOutcome verdict = sampling::verify_drafts(out.logits.narrow(0, rows.first_logit, l + 1), drafts,
                                                                  block.probs, a.request.sampling, a.rng, options_.verifier);
  const int64_t n_acc = verdict.n_accepted;
  const bool has_confidence = !block.confidence.empty();
  if (l > 0) policy_.observe(l, n_acc, has_confidence);
  if (options_.record_rounds && a.draft_slot >= 0)
    a.outcome.rounds.push_back({block.confidence, l, n_acc,
                                sampling::acceptance_probabilities(out.logits.narrow(0, rows.first_logit, l + 1), drafts,
                                                                   block.probs, a.request.sampling)});
  int64_t committed = 0;
  for (int64_t k = 0; k < n_acc && !a.done; ++k, ++committed) emit(a, drafts[k]);
  if (!a.done) {
    ++committed;
    emit(a, verdict.next_token);
  }
  a.outcome.stats.record_step(l, n_acc, committed);
  ++stats_.decode_request_steps;
  stats_.verified_drafts += l;
  stats_.committed += committed;
  if (a.done) return;
  cache_.truncate(a.kv_slot, rows.kv_start + n_acc + 1);  // anchor + accepted drafts
  if (a.draft_slot >= 0) {
    std::vector<int64_t> ids{a.anchor};
    ids.insert(ids.end(), drafts.begin(), drafts.begin() + n_acc);
    drafter_->commit(a.draft_slot, ids, features.narrow(0, rows.first_row, n_acc + 1));
  }
  a.anchor = verdict.next_token;
}

// Prefill progress; a finished prompt draws its first token and starts decoding.
void Engine::finish_prefill(const PrefillChunk& c, const model::ForwardOutput& out, const torch::Tensor& features) {
  Active& a = *c.a;
  a.prefilled += c.n;
  if (a.draft_slot >= 0) a.prompt_features.push_back(features.narrow(0, c.row, c.n).clone());
  if (c.logit < 0) return;
  if (a.request.max_tokens == 0) return finish(a, "length");
  const int64_t token = sampling::draw_token(out.logits[c.logit], a.request.sampling, a.rng);
  emit(a, token);
  if (a.done) return;
  a.decoding = true;
  a.anchor = token;
  if (a.draft_slot >= 0) drafter_->begin(a.draft_slot, a.request.prompt_ids, torch::cat(a.prompt_features));
  a.prompt_features.clear();
}

// Requests that finished leave; their slots serve the next ones.
std::vector<RequestOutcome> Engine::release_finished() {
  std::vector<RequestOutcome> finished;
  for (auto it = active_.begin(); it != active_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    cache_.free(it->kv_slot);
    if (it->draft_slot >= 0) {
      if (it->decoding) drafter_->end(it->draft_slot);
      free_draft_slots_.push_back(it->draft_slot);
    }
    if (!it->text_cut && options_.detokenize) it->outcome.text = options_.detokenize(it->outcome.ids);
    it->outcome.next_draw = it->rng.counter();
    finished.push_back(std::move(it->outcome));
    it = active_.erase(it);
  }
  return finished;
}

std::vector<RequestOutcome> Engine::step() {
  const auto t_start = Clock::now();
  admit();
  for (Active& a : active_)
    if (a.cancelled && !a.done) finish(a, "cancelled");
  std::vector<RequestOutcome> finished = finish_cancelled_waiting();

  std::vector<Active*> decoding, prefilling;
  for (Active& a : active_)
    if (!a.done) (a.decoding ? decoding : prefilling).push_back(&a);
  if (!decoding.empty() || !prefilling.empty()) ++stats_.steps;

  // 1. Draft (unless the policy judges, from old confidences, that drafting costs more than it brings).
  const auto t_draft = Clock::now();
  const schedule::StepPlan plan =
      drafter_ ? policy_.plan_step(static_cast<int64_t>(decoding.size())) : schedule::StepPlan{};
  const std::vector<draft::DraftBlock> blocks = draft(decoding, plan);
  const auto t_verify = Clock::now();
  if (drafter_) stats_.draft_seconds += seconds_between(t_draft, t_verify);

  // 2. Schedule: without drafts the lengths are all 0 (and the history keeps the last drafting steps).
  std::vector<int64_t> lengths(decoding.size(), 0);
  if (plan.drafting != schedule::Drafting::kOff) {
    std::vector<schedule::ProposedBlock> proposed(blocks.size());
    for (size_t i = 0; i < blocks.size(); ++i)
      proposed[i] = {static_cast<int64_t>(blocks[i].tokens.size()), blocks[i].confidence};
    lengths = policy_.choose_lengths(proposed, plan);
  } else if (!decoding.empty()) {
    policy_.note_step_without_drafts(static_cast<int64_t>(decoding.size()));
  }

  // 3. One ragged forward: verify rows, then prefill chunks.
  std::vector<VerifyRows> rows;
  std::vector<PrefillChunk> chunks;
  const model::ForwardBatch batch = build_forward(decoding, prefilling, blocks, lengths, rows, chunks);
  model::ForwardOutput out;
  if (!batch.token_ids.empty()) out = target_.forward(cache_, batch);
  stats_.target_tokens += static_cast<int64_t>(batch.token_ids.size());
  // [n_tokens, m hidden] features of the drafter's target layers ([n_tokens, 0] when it reads none).
  torch::Tensor features;
  if (drafter_ && !batch.token_ids.empty())
    features = batch.capture_layers.empty() ? torch::empty({static_cast<int64_t>(batch.token_ids.size()), 0})
                                            : out.captured_features();

  // 4. Verify and commit each decoding request; then the prefills' progress.
  for (size_t i = 0; i < decoding.size(); ++i)
    for_request(*decoding[i], [&] { verify_and_commit(*decoding[i], blocks[i], lengths[i], rows[i], out, features); });
  stats_.verify_seconds += seconds_between(t_verify, Clock::now());
  for (const PrefillChunk& c : chunks) for_request(*c.a, [&] { finish_prefill(c, out, features); });

  std::vector<RequestOutcome> released = release_finished();
  finished.insert(finished.end(), std::make_move_iterator(released.begin()), std::make_move_iterator(released.end()));

  last_step_ = {};
  last_step_.drafting_requests = plan.n_drafting();
  for (const PrefillChunk& c : chunks) last_step_.prefill_tokens += c.n;
  last_step_.verify_tokens = static_cast<int64_t>(batch.token_ids.size()) - last_step_.prefill_tokens;
  last_step_.requests = static_cast<int64_t>(batch.seqs.size());
  last_step_.draft_seconds = seconds_between(t_draft, t_verify);
  last_step_.seconds = seconds_between(t_start, Clock::now());
  if (options_.step_cost) {
    const auto tokens = static_cast<int64_t>(batch.token_ids.size());
    last_step_.profile_seconds = options_.step_cost->step_seconds(last_step_.drafting_requests, tokens, last_step_.requests);
    last_step_.predicted_seconds = last_step_.profile_seconds;
    if (drift_) {
      last_step_.predicted_seconds = drift_->predict(last_step_.drafting_requests, tokens, last_step_.requests);
      if (drift_->observe(last_step_)) policy_.rebuild_sps_tables();
    }
  }
  return finished;
}

double Engine::kv_cache_usage() const {
  int64_t used = 0;
  for (const Active& a : active_) used += cache_.length(a.kv_slot);
  const int64_t total = options_.max_concurrency * cache_.capacity();
  return total > 0 ? static_cast<double>(used) / static_cast<double>(total) : 0.0;
}

std::vector<RequestOutcome> Engine::run() {
  std::vector<RequestOutcome> all;
  while (!idle()) {
    std::vector<RequestOutcome> done = step();
    all.insert(all.end(), std::make_move_iterator(done.begin()), std::make_move_iterator(done.end()));
  }
  std::sort(all.begin(), all.end(), [](const RequestOutcome& x, const RequestOutcome& y) { return x.id < y.id; });
  return all;
}

}  // namespace dspark::engine
