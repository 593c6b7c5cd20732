// POST /v1/chat/completions and /v1/completions: a parsed request becomes n engine requests (one
// per choice, seeds seed .. seed + n - 1), submitted to the engine service, answered as one JSON
// response or streamed as Server-Sent Events while the engine commits tokens.
#pragma once
#include <httplib.h>

#include "serve/http_server.h"
#include "serve/openai_protocol.h"

namespace dspark::serve {

// The engine requests for `request` (n of them): prompt from the chat template or the prompt,
// sampling from the request over the model's generation_config.json, stops, speculation.
// Throws ApiError(400) for what the engine's request contract refuses (the message states the
// prompt length, max_tokens and the context limit when they do not fit).
std::vector<engine::EngineRequest> engine_requests(const Backend& backend, const CompletionRequest& request);

// Answers one request (its JSON body); throws ApiError before anything is sent.
void handle_completion(const Backend& backend, const std::string& body, httplib::Response& res, Endpoint endpoint);

}  // namespace dspark::serve
