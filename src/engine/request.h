// A generation request and the one contract every entry point holds it to (the CLI, the
// benchmarks, data regeneration, calibration and the server all submit through Engine::submit,
// which calls check_request before any work).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/request_stats.h"
#include "model/config.h"
#include "sampling/sampling.h"

namespace dspark::engine {

struct EngineRequest {
  std::vector<int64_t> prompt_ids;        // [n_prompt]
  sampling::SamplingParams sampling;      // per request, with its own seed
  int64_t max_tokens = 128;               // new tokens, at most
  std::vector<int64_t> stop_ids;          // generation ends at any of these (excluded from the output)
  std::vector<std::string> stop_strings;  // ... or when the text contains one (needs a detokenizer)
  bool speculate = true;                  // false: this request decodes one token per step
  int64_t gamma = -1;                     // most drafts per step for this request; -1: the engine's
  double confidence_threshold = 0;        // DSpark: cut each proposal before the first c_k below this
  // Streaming: each committed token as it is produced (stop tokens excluded). Return false to
  // cancel the request.
  std::function<bool(int64_t token)> on_token;
  // Index of the request's first draw in its seed's random stream: a conversation's later turns
  // continue the stream of its earlier ones (RequestOutcome::next_draw).
  uint64_t first_draw = 0;
};

// What a request is checked against.
struct RequestLimits {
  int64_t vocab_size = 0;
  int64_t max_context = 0;                // prompt + max_tokens, at most
  bool can_detokenize = false;            // stop strings need it
};

// The sampling a request gets for the parameters it leaves out: the model's
// generation_config.json, as in Hugging Face and vLLM (greedy when it does not sample). Seed 0.
sampling::SamplingParams sampling_defaults(const model::GenerationConfig& generation);

// The model's context limit: max_position_embeddings, or less when max_context > 0 asks for less.
// Throws dspark::Error when max_context asks for more than the model was trained for.
int64_t context_limit(const model::ModelConfig& config, int64_t max_context = 0);

// Throws dspark::Error naming the first problem: bad sampling parameters (a negative temperature
// included), an empty prompt, a token id outside the vocabulary, a negative max_tokens, a prompt
// plus max_tokens beyond the context limit (both numbers stated), stop strings without a tokenizer.
void check_request(const EngineRequest& request, const RequestLimits& limits);

struct DraftRound {                      // one decode step of a request that drafted
  std::vector<float> confidence;         // [proposed] c_k of the block (empty without a confidence head)
  int64_t verified = 0;                  // drafts sent to the target
  int64_t accepted = 0;                  // drafts accepted
  std::vector<float> exact_acceptance;   // [verified] 1 - TV(p_k, q_k) of each verified slot: what a
                                         // perfect confidence head would say (sampling/verify.h)
};

struct RequestOutcome {
  int64_t id = 0;
  std::vector<int64_t> ids;              // generated tokens, stop token excluded
  std::string text;                      // with a detokenizer: the output text, cut before a stop string
                                         // (ids keep the token that completed it); with "error", the error
  std::string finish_reason;             // "stop", "length", "cancelled", or "error" (EngineOptions::
                                         // fail_requests_alone)
  RequestStats stats;
  uint64_t next_draw = 0;                // the request's random stream position when it finished
  std::vector<DraftRound> rounds;        // per drafting step, with EngineOptions::record_rounds
};

}  // namespace dspark::engine
