// What one request did, in one type: token counts, timings, and the speculative counters in vLLM's
// schema (num_drafts, num_draft_tokens, num_accepted_tokens, num_accepted_tokens_per_pos). Every
// field is a summable counter, so a benchmark pools requests with merge() and ratios are taken
// from the pooled sums (numerator over denominator, as DeepSpec reports them). The CLI's JSON, the
// benchmarks and the server's metrics all read this type.
#pragma once
#include <cstdint>
#include <vector>

namespace dspark::engine {

struct RequestStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;        // output tokens (stop tokens excluded)
  // Timings, in seconds from the request's submission.
  double queued_seconds = 0;           // until admitted to a KV slot
  double first_token_seconds = 0;      // until its first output token (queue + prefill: TTFT)
  double seconds = 0;                  // until it finished (end-to-end latency)

  // Speculative decoding, counted over the request's decode steps (after its prefill).
  int64_t num_steps = 0;               // decode steps (each commits at least one token)
  int64_t num_committed_tokens = 0;    // tokens those steps committed: accepted drafts plus the
                                       // bonus/residual token (a stop token that ends the request included)
  int64_t num_drafts = 0;              // steps that verified at least one draft token
  int64_t num_draft_tokens = 0;        // draft tokens verified
  int64_t num_accepted_tokens = 0;     // draft tokens accepted
  std::vector<int64_t> num_draft_tokens_per_pos;     // [positions] steps that verified position k
  std::vector<int64_t> num_accepted_tokens_per_pos;  // [positions] steps that accepted position k

  // One decode step: `verified` drafts went to the target, `accepted` of them were accepted and
  // `committed` tokens were emitted (accepted + 1, or fewer when a stop token ended the request).
  void record_step(int64_t verified, int64_t accepted, int64_t committed);
  void merge(const RequestStats& other);

  // tau: committed tokens per decode step, bonus included (DeepSpec's acceptance length).
  double acceptance_length() const;
  // vLLM's mean acceptance length: 1 + accepted / drafts.
  double mean_acceptance_length() const;
  // Accepted over verified draft tokens.
  double acceptance_rate() const;
  // Draft tokens verified per decode step.
  double drafts_per_step() const;
  // [positions] accepted / verified at position k (unconditional).
  std::vector<double> accept_rate_per_pos() const;
  // [positions] accepted at position k / num_drafts (vLLM's per-position acceptance rate).
  std::vector<double> accepted_per_draft() const;
  // [positions] P(position k accepted | positions < k accepted and k verified).
  std::vector<double> conditional_accept_rate() const;
  // Output tokens per second after the first token (0 with fewer than two tokens).
  double decode_tokens_per_second() const;
};

}  // namespace dspark::engine
