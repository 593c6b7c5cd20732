#include "engine/batch_engine.h"

#include <algorithm>

#include "common/error.h"
#include "sampling/rejection.h"
#include "schedule/async_scheduler.h"

namespace dspark::engine {

namespace {

using Clock = std::chrono::steady_clock;

// While dspark-async's gate keeps the drafter off it still drafts now and then (a probe), so the
// confidences it judges by stay current. A probe verifies nothing: its blocks only enter the
// history, so it costs one drafting call, not a verify step widened by drafts the gate has just
// judged not worth it. The interval starts at 8 steps and doubles after every probe that does not
// turn the gate on, up to 256, so where drafting never pays the probes cost little; it resets when
// drafting pays again. Only past decisions set it: nothing depends on a draft.
constexpr int64_t kFirstProbeInterval = 8, kMaxProbeInterval = 256;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

BatchEngine::BatchEngine(model::Transformer& target, draft::Drafter* drafter, EngineOptions options)
    : target_(target),
      drafter_(options.schedule == schedule::ScheduleKind::kNone ? nullptr : drafter),
      options_(std::move(options)),
      cache_(target.make_cache(options_.max_concurrency, options_.max_context + options_.gamma + 2)) {
  if (options_.max_concurrency < 1) throw Error("engine: --concurrency must be >= 1");
  if (options_.gamma < 0) throw Error("engine: --gamma must be >= 0");
  if (options_.prefill_chunk < 1) throw Error("engine: the prefill chunk must be >= 1");
  if (drafter_ && drafter_->max_slots() < options_.max_concurrency)
    throw Error("engine: the drafter has " + std::to_string(drafter_->max_slots()) + " slots, fewer than --concurrency " +
                std::to_string(options_.max_concurrency));
  if (schedule::needs_sps_table(options_.schedule)) {
    if (!options_.step_cost) throw Error("engine: schedule " + schedule::schedule_kind_name(options_.schedule) + " needs a step-cost profile");
    const int64_t needed = options_.max_concurrency * (options_.gamma + 1);
    if (static_cast<int64_t>(options_.step_cost->verify_seconds.size()) < needed)
      throw Error("engine: the step-cost profile covers " + std::to_string(options_.step_cost->verify_seconds.size()) +
                  " tokens per step, fewer than concurrency x (gamma + 1) = " + std::to_string(needed) +
                  " (run `dspark profile` with a larger --max-requests)");
  }
  for (int64_t s = options_.max_concurrency - 1; s >= 0; --s) free_draft_slots_.push_back(s);
  probe_interval_ = kFirstProbeInterval;
}

int64_t BatchEngine::submit(EngineRequest request) {
  sampling::check_sampling_params(request.sampling);
  if (request.prompt_ids.empty()) throw Error("request: the prompt is empty");
  if (request.max_tokens < 0) throw Error("request: max_tokens must be >= 0");
  const int64_t vocab = target_.config().vocab_size;
  for (int64_t id : request.prompt_ids)
    if (id < 0 || id >= vocab) throw Error("request: token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab) + ")");
  if (static_cast<int64_t>(request.prompt_ids.size()) + request.max_tokens > options_.max_context)
    throw Error("request: prompt (" + std::to_string(request.prompt_ids.size()) + ") + max_tokens (" +
                std::to_string(request.max_tokens) + ") exceeds the context limit " + std::to_string(options_.max_context));
  if (!request.stop_strings.empty() && !options_.detokenize) throw Error("request: stop strings need a tokenizer");
  Active a;
  a.id = next_id_++;
  a.rng = sampling::Rng(request.sampling.seed);
  a.outcome.id = a.id;
  a.outcome.result.prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
  a.request = std::move(request);
  a.start = Clock::now();
  waiting_.push_back(std::move(a));
  return waiting_.back().id;
}

void BatchEngine::cancel(int64_t id) {
  for (Active& a : waiting_)
    if (a.id == id) a.cancelled = true;
  for (Active& a : active_)
    if (a.id == id) a.cancelled = true;
}

void BatchEngine::admit() {
  while (!waiting_.empty() && static_cast<int64_t>(active_.size()) < options_.max_concurrency) {
    Active a = std::move(waiting_.front());
    waiting_.pop_front();
    a.kv_slot = *cache_.allocate();
    if (drafter_ && a.request.speculate) {
      a.draft_slot = free_draft_slots_.back();
      free_draft_slots_.pop_back();
    }
    active_.push_back(std::move(a));
  }
}

void BatchEngine::finish(Active& a, const std::string& reason) {
  a.done = true;
  a.outcome.result.finish_reason = reason;
  a.outcome.result.seconds = seconds_since(a.start);
}

void BatchEngine::emit(Active& a, int64_t token) {
  if (a.done) return;
  const EngineRequest& r = a.request;
  if (std::find(r.stop_ids.begin(), r.stop_ids.end(), token) != r.stop_ids.end()) return finish(a, "stop");
  std::vector<int64_t>& ids = a.outcome.result.ids;
  ids.push_back(token);
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

int64_t BatchEngine::gamma_of(const Active& a) const {
  if (a.draft_slot < 0) return 0;
  int64_t gamma = a.request.gamma >= 0 ? std::min(a.request.gamma, options_.gamma) : options_.gamma;
  if (options_.schedule == schedule::ScheduleKind::kMtp1) gamma = std::min<int64_t>(gamma, 1);
  if (drafter_->max_gamma() > 0) gamma = std::min(gamma, drafter_->max_gamma());
  // A step commits at most gamma + 1 tokens: never draft past max_tokens.
  const int64_t remaining = a.request.max_tokens - static_cast<int64_t>(a.outcome.result.ids.size());
  return std::max<int64_t>(0, std::min(gamma, remaining - 1));
}

std::vector<schedule::RequestDraft> BatchEngine::drafts_for_schedule(const std::vector<Active*>& decoding,
                                                                     const std::vector<draft::DraftBlock>& blocks) const {
  std::vector<schedule::RequestDraft> batch(decoding.size());
  for (size_t i = 0; i < decoding.size(); ++i) {
    const draft::DraftBlock& block = blocks[i];
    const size_t n = block.tokens.size();
    batch[i].cap = static_cast<int64_t>(n);
    if (!block.confidence.empty()) {
      batch[i].confidences.assign(block.confidence.begin(), block.confidence.end());
    } else {
      for (size_t k = 0; k < n; ++k) {
        const double accepted = k < slot_accepted_.size() ? slot_accepted_[k] : 0.0;
        const double verified = k < slot_verified_.size() ? slot_verified_[k] : 0.0;
        batch[i].confidences.push_back((accepted + 1.0) / (verified + 2.0));
      }
    }
    for (double& c : batch[i].confidences) c = std::clamp(c, 0.0, 1.0);
  }
  return batch;
}

std::vector<int64_t> BatchEngine::schedule(const std::vector<schedule::RequestDraft>& batch, int64_t n_requests) {
  schedule::ScheduleContext context;
  context.threshold = options_.threshold;
  context.two_steps_back = history_.two_steps_back();
  if (schedule::needs_sps_table(options_.schedule)) context.sps = &sps_table(n_requests);
  return schedule::schedule_lengths(options_.schedule, batch, context);
}

void BatchEngine::remember(std::vector<schedule::RequestDraft> batch) {
  history_.push(std::move(batch));
  old_batch_pays_.reset();
}

const schedule::SpsTable& BatchEngine::sps_table(int64_t n_requests) {
  auto it = sps_tables_.find(n_requests);
  if (it == sps_tables_.end()) it = sps_tables_.emplace(n_requests, options_.step_cost->sps_for(n_requests)).first;
  return it->second;
}

// dspark-async only: whether this step drafts at all, from the batch of two drafting steps ago.
// Until the history holds two batches there is nothing to judge by: those steps draft only to
// fill it (probes), so a fresh engine never pays for verifying drafts blind. The judgement of
// one old batch is kept until the next drafting step replaces it.
BatchEngine::Drafting BatchEngine::drafting_now() {
  if (options_.schedule != schedule::ScheduleKind::kDsparkAsync) return Drafting::kVerify;
  const auto old = history_.two_steps_back();
  if (!old) return Drafting::kProbe;
  if (!old_batch_pays_) {
    const int64_t n = static_cast<int64_t>(old->size());
    old_batch_pays_ = schedule::drafting_pays(*old, sps_table(n), sps_table(0));
  }
  if (*old_batch_pays_) {
    probe_interval_ = kFirstProbeInterval;
    return Drafting::kVerify;
  }
  if (steps_without_drafting_ + 1 < probe_interval_) return Drafting::kOff;
  probe_interval_ = std::min(2 * probe_interval_, kMaxProbeInterval);
  return Drafting::kProbe;
}

void BatchEngine::record_acceptance(int64_t verified, int64_t accepted) {
  if (static_cast<int64_t>(slot_verified_.size()) < verified) {
    slot_verified_.resize(verified, 0.0);
    slot_accepted_.resize(verified, 0.0);
  }
  // Slot k was reached when every slot before it was accepted.
  for (int64_t k = 0; k < verified && k <= accepted; ++k) {
    slot_verified_[k] += 1;
    if (k < accepted) slot_accepted_[k] += 1;
  }
}

std::vector<RequestOutcome> BatchEngine::step() {
  admit();
  for (Active& a : active_)
    if (a.cancelled && !a.done) finish(a, "cancelled");
  // Requests cancelled while waiting finish without running.
  std::vector<RequestOutcome> finished;
  for (auto it = waiting_.begin(); it != waiting_.end();)
    if (it->cancelled) {
      finish(*it, "cancelled");
      finished.push_back(std::move(it->outcome));
      it = waiting_.erase(it);
    } else {
      ++it;
    }

  std::vector<Active*> decoding, prefilling;
  for (Active& a : active_)
    if (!a.done) (a.decoding ? decoding : prefilling).push_back(&a);
  if (!decoding.empty() || !prefilling.empty()) ++stats_.steps;

  // 1. Draft: one call for every decoding request that speculates (unless dspark-async judges,
  //    from old confidences, that drafting costs more than it brings).
  const auto t_draft = Clock::now();
  std::vector<draft::DraftBlock> blocks(decoding.size());
  const Drafting drafting = !decoding.empty() && drafter_ ? drafting_now() : Drafting::kOff;
  const bool draft_now = drafting != Drafting::kOff;
  steps_without_drafting_ = draft_now || decoding.empty() ? 0 : steps_without_drafting_ + 1;
  if (draft_now) {
    ++stats_.drafting_steps;
    std::vector<draft::DraftRequest> requests;
    std::vector<size_t> which;
    for (size_t i = 0; i < decoding.size(); ++i) {
      Active& a = *decoding[i];
      const int64_t gamma = gamma_of(a);
      if (gamma <= 0) continue;
      requests.push_back({a.draft_slot, a.anchor, gamma, 0.0, &a.request.sampling, &a.rng});
      which.push_back(i);
    }
    if (!requests.empty()) {
      std::vector<draft::DraftBlock> proposed = drafter_->propose(requests);
      for (size_t j = 0; j < which.size(); ++j) blocks[which[j]] = std::move(proposed[j]);
    }
  }
  if (drafter_) stats_.draft_seconds += seconds_since(t_draft);

  // 2. Schedule.
  const auto t_verify = Clock::now();
  // Without drafts the lengths are all 0 and the history keeps the last drafting steps; a probe's
  // blocks enter the history, and it too verifies nothing.
  std::vector<int64_t> lengths(decoding.size(), 0);
  if (draft_now) {
    std::vector<schedule::RequestDraft> drafted = drafts_for_schedule(decoding, blocks);
    if (drafting == Drafting::kVerify) lengths = schedule(drafted, static_cast<int64_t>(decoding.size()));
    remember(std::move(drafted));
  }

  // 3. One ragged forward: verify rows, then prefill chunks.
  model::ForwardBatch batch;
  if (drafter_) batch.capture_layers = drafter_->target_layer_ids();
  std::vector<int64_t> row_begin(decoding.size()), logit_begin(decoding.size()), start(decoding.size());
  for (size_t i = 0; i < decoding.size(); ++i) {
    Active& a = *decoding[i];
    const int64_t l = lengths[i];
    start[i] = cache_.length(a.kv_slot);
    row_begin[i] = static_cast<int64_t>(batch.token_ids.size());
    logit_begin[i] = static_cast<int64_t>(batch.logit_rows.size());
    batch.token_ids.push_back(a.anchor);
    batch.token_ids.insert(batch.token_ids.end(), blocks[i].tokens.begin(), blocks[i].tokens.begin() + l);
    batch.seqs.push_back({a.kv_slot, l + 1});
    for (int64_t k = 0; k <= l; ++k) batch.logit_rows.push_back(row_begin[i] + k);
  }
  struct Chunk { Active* a; int64_t row, n, logit; };
  std::vector<Chunk> chunks;
  int64_t budget = options_.prefill_chunk;
  for (Active* a : prefilling) {
    if (budget <= 0) break;
    const int64_t n_prompt = static_cast<int64_t>(a->request.prompt_ids.size());
    const int64_t n = std::min(budget, n_prompt - a->prefilled);
    const int64_t row = static_cast<int64_t>(batch.token_ids.size());
    batch.token_ids.insert(batch.token_ids.end(), a->request.prompt_ids.begin() + a->prefilled,
                           a->request.prompt_ids.begin() + a->prefilled + n);
    batch.seqs.push_back({a->kv_slot, n});
    int64_t logit = -1;
    if (a->prefilled + n == n_prompt) {
      logit = static_cast<int64_t>(batch.logit_rows.size());
      batch.logit_rows.push_back(row + n - 1);
    }
    chunks.push_back({a, row, n, logit});
    budget -= n;
  }
  model::ForwardOutput out;
  if (!batch.token_ids.empty()) out = target_.forward(cache_, batch);
  stats_.target_tokens += static_cast<int64_t>(batch.token_ids.size());
  const torch::Tensor features = drafter_ && !batch.token_ids.empty() ? out.captured_features() : torch::Tensor();

  // 4. Verify and commit each decoding request.
  for (size_t i = 0; i < decoding.size(); ++i) {
    Active& a = *decoding[i];
    const int64_t l = lengths[i];
    const std::vector<int64_t> drafts(blocks[i].tokens.begin(), blocks[i].tokens.begin() + l);
    const sampling::VerifyOutcome outcome = verify_drafts(out.logits.narrow(0, logit_begin[i], l + 1), drafts,
                                                          blocks[i].probs, a.request.sampling, a.rng, options_.verifier);
    const int64_t n_acc = outcome.n_accepted;
    ++stats_.decode_request_steps;
    stats_.verified_drafts += l;
    ++a.outcome.decode_steps;
    a.outcome.verified_drafts += l;
    a.outcome.accepted_drafts += n_acc;
    if (l > 0 && blocks[i].confidence.empty()) record_acceptance(l, n_acc);
    int64_t committed = 0;
    for (int64_t k = 0; k < n_acc && !a.done; ++k, ++committed) emit(a, drafts[k]);
    if (!a.done) {
      ++committed;
      emit(a, outcome.next_token);
    }
    stats_.committed += committed;
    if (a.done) continue;
    cache_.truncate(a.kv_slot, start[i] + n_acc + 1);  // anchor + accepted drafts
    if (a.draft_slot >= 0) {
      std::vector<int64_t> ids{a.anchor};
      ids.insert(ids.end(), drafts.begin(), drafts.begin() + n_acc);
      drafter_->commit(a.draft_slot, ids, features.narrow(0, row_begin[i], n_acc + 1));
    }
    a.anchor = outcome.next_token;
  }
  stats_.verify_seconds += seconds_since(t_verify);

  // 5. Prefill progress; a finished prompt draws its first token and starts decoding.
  for (const Chunk& c : chunks) {
    Active& a = *c.a;
    a.prefilled += c.n;
    if (a.draft_slot >= 0) a.prompt_features.push_back(features.narrow(0, c.row, c.n).clone());
    if (c.logit < 0) continue;
    a.outcome.result.prefill_seconds = seconds_since(a.start);
    if (a.request.max_tokens == 0) {
      finish(a, "length");
      continue;
    }
    const int64_t token = draw_token(out.logits[c.logit], a.request.sampling, a.rng);
    emit(a, token);
    if (a.done) continue;
    a.decoding = true;
    a.anchor = token;
    if (a.draft_slot >= 0) drafter_->begin(a.draft_slot, a.request.prompt_ids, torch::cat(a.prompt_features));
    a.prompt_features.clear();
  }

  // Requests that finished leave; their slots serve the next ones.
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
    if (!it->text_cut && options_.detokenize) it->outcome.text = options_.detokenize(it->outcome.result.ids);
    finished.push_back(std::move(it->outcome));
    it = active_.erase(it);
  }
  return finished;
}

std::vector<RequestOutcome> BatchEngine::run() {
  std::vector<RequestOutcome> all;
  while (!idle()) {
    std::vector<RequestOutcome> done = step();
    all.insert(all.end(), std::make_move_iterator(done.begin()), std::make_move_iterator(done.end()));
  }
  return all;
}

}  // namespace dspark::engine
