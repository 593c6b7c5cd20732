// The engine: every generation runs here, one request or many (a single request is a batch of
// one; continuous batching, dspark-method 4.3 and 7, architecture.md "one decoding step").
// Requests join and leave between steps. One step:
//   1. draft: the verification policy (schedule/verification_policy.h) says whether to draft; one
//      batched drafter call proposes up to gamma tokens for every decoding request, with q per slot
//      and (DSpark) a confidence per slot;
//   2. schedule: the policy picks each request's verification length l_r;
//   3. one ragged target forward: every decoding request's anchor + l_r drafts, plus chunks of the
//      prompts still being prefilled (so new requests never stall decoding);
//   4. verify and commit, per request on its own random stream (sampling/verify.h): the target KV
//      truncated to the accepted prefix, the committed positions' features handed to the drafter.
// Every schedule is lossless: l_r never depends on the values of the drafts it admits. Without a
// drafter, or with the `none` schedule, every request decodes one token per step.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "draft/drafter.h"
#include "engine/request.h"
#include "engine/step_cost.h"
#include "engine/step_cost_drift.h"
#include "model/transformer.h"
#include "sampling/verify.h"
#include "schedule/verification_policy.h"

namespace dspark::engine {

struct EngineOptions {
  int64_t max_concurrency = 8;          // requests decoding at once (KV slots; drafter slots)
  int64_t max_context = 0;              // prompt + output tokens per request, and the KV cache's
                                        // positions per slot; 0: the model's max_position_embeddings
  int64_t gamma = 7;                    // drafts per request per step (at most the drafter's block)
  schedule::ScheduleKind schedule = schedule::ScheduleKind::kDsparkAsync;
  double threshold = 0.5;               // `threshold` policy: cut on the survival a_j
  const StepCost* step_cost = nullptr;  // required by dspark-sync / dspark-async (not owned)
  // Rescale the profile by the steps' measured times (engine/step_cost_drift.h), so the schedules
  // plan with the machine's speed of the minute. Plans then depend on timing: on for serving, where
  // batches already follow arrival times; off where a seed must give the same tokens every run.
  bool rescale_step_cost = false;
  int64_t prefill_chunk = 512;          // prompt tokens per step, over all prefilling requests
  std::function<std::string(const std::vector<int64_t>&)> detokenize;  // for stop strings and text
  bool record_rounds = false;           // fill RequestOutcome::rounds (calibration, conformance)
  // A request whose own token choice fails (sampling or greedy decoding of NaN logits) finishes
  // with finish_reason "error" and the message as its text, and the step goes on for the others
  // (serving, where they belong to other clients). Off, the step throws (commands that run their
  // own requests stop with the error).
  bool fail_requests_alone = false;
  sampling::SampledVerifier verifier;   // empty: sampling::verify_sampled (tests break it on purpose)
};

// Engine-wide counters (the per-request ones are RequestStats).
struct EngineStats {
  int64_t steps = 0;
  int64_t drafting_steps = 0;        // steps that called the drafter
  int64_t decode_request_steps = 0;  // sum over steps of requests verifying
  int64_t verified_drafts = 0;       // sum of l_r
  int64_t committed = 0;             // tokens committed by verify steps (bonus included)
  int64_t target_tokens = 0;         // sum of B (verify) plus prefill tokens
  double draft_seconds = 0;   // the drafting phase: the policy's gate and the drafting calls
  double verify_seconds = 0;  // scheduling, the target forward, verification and commits
  double mean_budget() const { return decode_request_steps ? double(verified_drafts) / double(decode_request_steps) : 0.0; }
  double acceptance_length() const { return decode_request_steps ? double(committed) / double(decode_request_steps) : 0.0; }
};

class Engine {
 public:
  // drafter may be null (every request then decodes autoregressively); it needs max_concurrency
  // slots. The engine owns the target's KV cache.
  Engine(model::Transformer& target, draft::Drafter* drafter, EngineOptions options);

  // check_request()s and queues a request; throws dspark::Error on a bad one (nothing else changes).
  int64_t submit(EngineRequest request);
  // Ends a request at the next step boundary with finish_reason "cancelled".
  void cancel(int64_t id);
  bool idle() const { return waiting_.empty() && active_.empty(); }
  int64_t n_active() const { return static_cast<int64_t>(active_.size()); }
  int64_t n_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  const RequestLimits& limits() const { return limits_; }

  // One step; returns the requests that finished in it.
  std::vector<RequestOutcome> step();
  // Steps until every submitted request has finished; outcomes in submission order.
  std::vector<RequestOutcome> run();

  const EngineStats& stats() const { return stats_; }
  const StepTiming& last_step() const { return last_step_; }
  const schedule::VerificationPolicy& policy() const { return policy_; }
  // The profile's rescaling (null unless options.rescale_step_cost and a profile were given).
  const StepCostDrift* step_cost_drift() const { return drift_.get(); }
  // Committed positions over all KV slots' positions, in [0, 1] (vLLM's kv_cache_usage_perc).
  double kv_cache_usage() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Active {
    EngineRequest request;
    sampling::Rng rng;
    // A probe's drafts are never verified, so they draw from a stream of their own: with the gate
    // shut dspark-async then emits exactly the tokens `none` does for the same seeds.
    sampling::Rng probe_rng;
    int64_t kv_slot = 0, draft_slot = -1;  // draft_slot -1: no drafting for this request
    int64_t prefilled = 0;                 // prompt tokens already in the KV cache
    std::vector<torch::Tensor> prompt_features;  // per prefill chunk [n, m d], until begin()
    bool decoding = false;
    int64_t anchor = 0;                    // last committed token, not yet in the KV cache
    bool cancelled = false, done = false;
    bool text_cut = false;                 // outcome.text already cut at a stop string
    RequestOutcome outcome;
    Clock::time_point submitted;
  };
  // Row offsets of one decoding request's part of the step's forward.
  struct VerifyRows {
    int64_t first_row = 0;    // its anchor's row in the batch (the features it commits start here)
    int64_t first_logit = 0;  // its anchor's row in the logits
    int64_t kv_start = 0;     // its KV length before the step
  };
  struct PrefillChunk {
    Active* a;
    int64_t row, n, logit;    // first row, tokens, logit row (-1 unless the prompt completes)
  };

  void admit();
  std::vector<RequestOutcome> finish_cancelled_waiting();
  std::vector<draft::DraftBlock> draft(const std::vector<Active*>& decoding, const schedule::StepPlan& plan);
  model::ForwardBatch build_forward(const std::vector<Active*>& decoding, const std::vector<Active*>& prefilling,
                                    const std::vector<draft::DraftBlock>& blocks, const std::vector<int64_t>& lengths,
                                    std::vector<VerifyRows>& rows, std::vector<PrefillChunk>& chunks) const;
  void verify_and_commit(Active& a, const draft::DraftBlock& block, int64_t length, const VerifyRows& rows,
                         const model::ForwardOutput& out, const torch::Tensor& features);
  void finish_prefill(const PrefillChunk& chunk, const model::ForwardOutput& out, const torch::Tensor& features);
  std::vector<RequestOutcome> release_finished();
  void emit(Active& a, int64_t token);  // appends a token or finishes the request
  void finish(Active& a, const std::string& reason);
  // Runs one request's part of a step; with fail_requests_alone, an Error it raises finishes that
  // request alone.
  template <class F>
  void for_request(Active& a, F&& part);
  int64_t gamma_of(const Active& a) const;
  double since_submit(const Active& a) const;

  model::Transformer& target_;
  draft::Drafter* drafter_;
  EngineOptions options_;
  RequestLimits limits_;
  model::KvCache cache_;
  // With rescale_step_cost, the profile rescaled by this engine's own steps (heap-held: the
  // policy's SPS source points at it).
  std::unique_ptr<StepCostDrift> drift_;
  schedule::VerificationPolicy policy_;
  std::vector<int64_t> free_draft_slots_;
  std::deque<Active> waiting_;
  std::vector<Active> active_;
  int64_t next_id_ = 0;
  EngineStats stats_;
  StepTiming last_step_;
};

}  // namespace dspark::engine
