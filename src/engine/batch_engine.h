// The confidence-scheduled batched engine (dspark-method 4.3, 7; architecture.md "one decoding
// step"). Requests join and leave between steps (continuous batching). One step:
//   1. draft: one batched drafter call proposes up to gamma tokens for every decoding request,
//      with q per slot and (DSpark) a confidence per slot;
//   2. schedule: a pure policy (schedule/) picks each request's verification length l_r from the
//      confidences and the measured SPS table;
//   3. one ragged target forward: every decoding request's anchor + l_r drafts, plus chunks of the
//      prompts still being prefilled (so new requests never stall decoding);
//   4. per request, rejection sampling on its own random stream, then commit: target KV truncated
//      to the accepted prefix, the committed positions' features handed to the drafter.
// Every schedule is lossless: l_r never depends on the values of the drafts it admits.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "draft/drafter.h"
#include "engine/autoregressive.h"
#include "engine/speculative.h"
#include "engine/step_cost.h"
#include "model/transformer.h"
#include "schedule/confidence_history.h"
#include "schedule/policy.h"

namespace dspark::engine {

struct EngineRequest {
  std::vector<int64_t> prompt_ids;      // [n_prompt]
  sampling::SamplingParams sampling;    // per request, with its own seed
  int64_t max_tokens = 128;
  std::vector<int64_t> stop_ids;        // generation ends at any of these (excluded from the output)
  std::vector<std::string> stop_strings;  // ... or when the text contains one (needs EngineOptions::detokenize)
  bool speculate = true;                // false: this request decodes one token per step
  int64_t gamma = -1;                   // most drafts per step for this request; -1: the engine's
  // Streaming: each committed token as it is produced (stop tokens excluded). Return false to
  // cancel the request.
  std::function<bool(int64_t token)> on_token;
};

struct RequestOutcome {
  int64_t id = 0;
  GenerationResult result;      // finish_reason: "stop", "length" or "cancelled"
  std::string text;             // with EngineOptions::detokenize: the output text, cut before a stop
                                // string (ids keep the token that completed it)
  int64_t decode_steps = 0;     // steps in which this request verified (after its prefill)
  int64_t verified_drafts = 0;  // sum of l_r over those steps
  int64_t accepted_drafts = 0;
};

struct EngineOptions {
  int64_t max_concurrency = 8;          // requests decoding at once (KV slots; drafter slots)
  int64_t max_context = 2048;           // prompt + output tokens per request
  int64_t gamma = 7;                    // drafts per request per step (at most the drafter's block)
  schedule::ScheduleKind schedule = schedule::ScheduleKind::kDsparkAsync;
  double threshold = 0.5;               // `threshold` policy: cut on the survival a_j
  const StepCost* step_cost = nullptr;  // required by dspark-sync / dspark-async (not owned)
  int64_t prefill_chunk = 512;          // prompt tokens per step, over all prefilling requests
  std::function<std::string(const std::vector<int64_t>&)> detokenize;  // for stop strings
  SampledVerifier verifier;             // empty: sampling::verify_sampled (tests break it on purpose)
};

struct EngineStats {
  int64_t steps = 0;
  int64_t drafting_steps = 0;        // steps that called the drafter
  int64_t decode_request_steps = 0;  // sum over steps of requests verifying
  int64_t verified_drafts = 0;       // sum of l_r
  int64_t committed = 0;             // tokens committed by verify steps (bonus included)
  int64_t target_tokens = 0;         // sum of B (verify) plus prefill tokens
  double draft_seconds = 0;   // the drafting phase: dspark-async's gate and the drafting calls
  double verify_seconds = 0;  // scheduling, the verify forward, rejection sampling and commits
  double mean_budget() const { return decode_request_steps ? double(verified_drafts) / double(decode_request_steps) : 0.0; }
  double acceptance_length() const { return decode_request_steps ? double(committed) / double(decode_request_steps) : 0.0; }
};

class BatchEngine {
 public:
  // drafter may be null (every request then decodes autoregressively); it needs max_concurrency
  // slots. The engine owns the target's KV cache.
  BatchEngine(model::Transformer& target, draft::Drafter* drafter, EngineOptions options);

  // Validates and queues a request; throws dspark::Error on a bad one (nothing else changes).
  int64_t submit(EngineRequest request);
  // Ends a request at the next step boundary with finish_reason "cancelled".
  void cancel(int64_t id);
  bool idle() const { return waiting_.empty() && active_.empty(); }
  int64_t n_active() const { return static_cast<int64_t>(active_.size()); }

  // One step; returns the requests that finished in it.
  std::vector<RequestOutcome> step();
  // Steps until every submitted request has finished; outcomes in finishing order.
  std::vector<RequestOutcome> run();

  const EngineStats& stats() const { return stats_; }

 private:
  struct Active {
    int64_t id = 0;
    EngineRequest request;
    sampling::Rng rng;
    int64_t kv_slot = 0, draft_slot = -1;  // draft_slot -1: no drafting for this request
    int64_t prefilled = 0;                 // prompt tokens already in the KV cache
    std::vector<torch::Tensor> prompt_features;  // per prefill chunk [n, m d], until begin()
    bool decoding = false;
    int64_t anchor = 0;                    // last committed token, not yet in the KV cache
    bool cancelled = false, done = false;
    bool text_cut = false;                 // outcome.text already cut at a stop string
    RequestOutcome outcome;
    std::chrono::steady_clock::time_point start;
  };

  void admit();
  void emit(Active& a, int64_t token);  // appends a token or finishes the request
  void finish(Active& a, const std::string& reason);
  std::vector<schedule::RequestDraft> drafts_for_schedule(const std::vector<Active*>& decoding,
                                                          const std::vector<draft::DraftBlock>& blocks) const;
  std::vector<int64_t> schedule(const std::vector<schedule::RequestDraft>& batch, int64_t n_requests);
  // Records a drafting step's blocks (verified or a probe) as the newest history entry.
  void remember(std::vector<schedule::RequestDraft> batch);
  void record_acceptance(int64_t verified, int64_t accepted);
  int64_t gamma_of(const Active& a) const;
  // kOff: no drafting call; kProbe: draft to refresh the gate's history, verify nothing;
  // kVerify: draft and verify what the schedule admits.
  enum class Drafting { kOff, kProbe, kVerify };
  Drafting drafting_now();
  const schedule::SpsTable& sps_table(int64_t n_requests);

  model::Transformer& target_;
  draft::Drafter* drafter_;
  EngineOptions options_;
  model::KvCache cache_;
  std::vector<int64_t> free_draft_slots_;
  std::deque<Active> waiting_;
  std::vector<Active> active_;
  int64_t next_id_ = 0;
  schedule::ConfidenceHistory history_;
  std::map<int64_t, schedule::SpsTable> sps_tables_;  // step_cost->sps_for(R), built once per R
  int64_t probe_interval_ = 0;          // dspark-async's gate: steps between probes (see the .cpp)
  std::optional<bool> old_batch_pays_;  // the gate's judgement of history_'s oldest batch
  int64_t steps_without_drafting_ = 0;
  // Drafters without a confidence head: per-slot conditional acceptance measured so far (Laplace
  // smoothed), a non-anticipating stand-in for c_k.
  std::vector<double> slot_accepted_, slot_verified_;
  EngineStats stats_;
};

}  // namespace dspark::engine
