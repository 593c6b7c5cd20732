// The OpenAI wire format of `dspark serve`: request bodies of /v1/chat/completions and
// /v1/completions parsed and checked into a CompletionRequest, and the response, stream-chunk,
// usage and error objects built from engine outcomes. Pure functions over JSON, no HTTP, so every
// shape is tested on its own (tests/serve/test_openai_protocol.cpp).
//
// Parameters: OpenAI's (model, messages | prompt, n, stop, max_tokens, max_completion_tokens,
// temperature, top_p, seed, stream, stream_options.include_usage) and vLLM's extras (top_k, min_p,
// ignore_eos, stop_token_ids, chat_template_kwargs.enable_thinking), plus `speculative` (false turns
// speculation off for the request). Parameters we know but do not implement are accepted only at
// their neutral value (frequency_penalty 0, logprobs false, ...); anything else is a 400 that names it.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request_stats.h"
#include "tokenizer/chat_template.h"

namespace dspark::serve {

// An error answered to the client, in OpenAI's envelope {"error": {message, type, param, code}}.
class ApiError : public std::runtime_error {
 public:
  // type defaults from the status: invalid_request_error (400), authentication_error (401),
  // not_found_error (404), request_too_large (413), unavailable_error (503), invalid_request_error
  // (any other 4xx), server_error (5xx).
  ApiError(int status, const std::string& message, std::string param = "", std::string type = "");
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string type_, param_;
};

nlohmann::json error_json(const ApiError& error);

// A request body as a JSON object; ApiError(400) when it is not JSON (or not UTF-8) or not an object.
nlohmann::json parse_json_object(const std::string& body);

enum class Endpoint { kChat, kCompletions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;                               // empty: not given
  std::vector<tokenizer::ChatMessage> messages;    // chat
  std::optional<std::string> prompt_text;          // completions: a string prompt ...
  std::vector<int64_t> prompt_ids;                 // ... or token ids
  int64_t n = 1;
  std::vector<std::string> stop;
  std::optional<int64_t> max_tokens;               // max_completion_tokens or max_tokens
  std::optional<double> temperature, top_p, min_p;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  bool stream = false, include_usage = false, ignore_eos = false;
  std::vector<int64_t> stop_token_ids;
  bool enable_thinking = false;                    // chat_template_kwargs.enable_thinking (Qwen3)
  bool speculative = true;
};

// Throws ApiError(400) naming the first problem: a body that is not a JSON object (or not UTF-8),
// an unknown parameter, a wrong type, a value out of range, empty messages or prompt.
CompletionRequest parse_completion_request(const std::string& body, Endpoint endpoint);

// One choice's result.
struct ChoiceOutcome {
  int64_t index = 0;
  std::string text;
  std::string finish_reason;  // "stop" or "length"
  engine::RequestStats stats;
};

// What every response and chunk of one request shares.
struct ResponseHead {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;        // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;   // Unix seconds
  std::string model;
};

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
// llama.cpp's per-request timings: prompt_n, prompt_ms, prompt_per_second, predicted_n,
// predicted_ms, predicted_per_second, and draft_n / draft_n_accepted when the request drafted.
nlohmann::json timings_json(const engine::RequestStats& stats);
// vLLM's per-request speculative metrics: {"speculative_decoding": {mean_acceptance_length,
// draft_acceptance_rate, acceptance_per_position, num_spec_steps, num_drafts, num_draft_tokens,
// num_accepted_draft_tokens}}.
nlohmann::json metrics_json(const engine::RequestStats& stats);

// The whole non-streamed response (chat.completion / text_completion), with usage, timings and
// metrics of all choices pooled.
nlohmann::json completion_response(const ResponseHead& head, const std::vector<ChoiceOutcome>& choices,
                                   int64_t prompt_tokens);
// A streamed chunk carrying text for choice `index` (chat: the first one also carries the role).
nlohmann::json delta_chunk(const ResponseHead& head, int64_t index, const std::string& text, bool first);
// The chunk that ends choice `index`: empty delta, its finish_reason, its timings and metrics.
nlohmann::json finish_chunk(const ResponseHead& head, const ChoiceOutcome& choice);
// The last chunk with stream_options.include_usage: no choices, the usage of all choices.
nlohmann::json usage_chunk(const ResponseHead& head, int64_t prompt_tokens, int64_t completion_tokens);

// The SSE events of one choice's text deltas, sse_event(delta_chunk(head, index, text, false))
// exactly, from a prefix and suffix rendered once per stream: a stream sends one per engine step,
// and building the whole JSON object each time costs more CPU than the rest of the stream.
class DeltaEvents {
 public:
  DeltaEvents(const ResponseHead& head, int64_t index);
  std::string event(const std::string& text) const;

 private:
  std::string prefix_, suffix_;  // the event around the JSON string of the text
};

// `data: <json>\n\n`, and the stream's end `data: [DONE]\n\n`.
std::string sse_event(const nlohmann::json& data);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace dspark::serve
