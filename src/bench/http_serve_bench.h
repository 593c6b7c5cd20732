// `dspark bench serve --url`: drives any OpenAI-compatible server (ours, llama.cpp's llama-server,
// vLLM) over HTTP with streaming requests and records what each request saw (http_stream.h), for
// the measures of http_serve_metrics.h.
//
// Load: a fixed pool of client threads, each with its own HTTP connection, takes requests in order.
// Request i arrives at arrival[i] (poisson_arrivals: all at 0 for an infinite rate) and is sent when
// it has arrived and a client is free. With a rate of inf and max_concurrency C that is the closed
// loop of the in-process benchmark (C clients, each sending its next request when the last one
// ends); with a finite rate it is vLLM's open loop (Poisson arrivals), capped at C in flight when
// C is given, as vLLM's semaphore does. Request i uses prompt i mod n_prompts and seed + i, like
// the in-process benchmark, so the workloads match.
//
// Every request streams with stream_options.include_usage. A request that fails (HTTP error, error
// event, timeout, dropped connection) is recorded as failed with its reason; a server that cannot
// be reached at all is a dspark::Error before any load.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench/http_serve_metrics.h"

namespace dspark::bench {

// Where the server is and how to talk to it.
struct HttpEndpoint {
  std::string url;       // http://HOST:PORT or https://HOST:PORT, optionally with a base path
  std::string api_key;   // sent as "Authorization: Bearer KEY" when not empty
  double timeout_s = 300;  // per request, from sending it to the end of its stream
};

// What each request asks for.
struct HttpRequestOptions {
  std::string endpoint = "chat";  // chat: /v1/chat/completions; completions: /v1/completions
  std::string model;              // the request's "model"
  int64_t max_tokens = 128;
  std::optional<double> temperature;  // unset: the server's default
  std::optional<int64_t> top_k;       // unset: the server's default (e.g. generation_config.json)
  std::optional<double> top_p;
  uint64_t seed = 0;                  // request i carries seed + i
  bool ignore_eos = false;            // vLLM's and llama.cpp's extension
};

struct HttpLoad {
  int64_t max_concurrency = 0;  // requests in flight at most; 0: no cap (a client per request)
  double request_rate = std::numeric_limits<double>::infinity();  // arrivals per second
  int64_t num_requests = 1;
  uint64_t seed = 0;  // of the arrival times
};

// What GET /metrics says; both empty when the server has no /metrics or exposes neither.
struct ServerCounters {
  std::optional<SpecCounters> spec;
  std::optional<EngineCounters> engine;  // dspark serve only
};

struct HttpRun {
  std::vector<RequestRecord> records;  // [num_requests], in request order
  double seconds = 0;                  // from the start of the load to the end of the last stream
  ServerCounters counters;             // what the run added to the server's counters, where exposed
};

struct ServerInfo {
  std::string model;     // /v1/models data[0].id
  std::string schedule;  // data[0].metadata.schedule (or .meta / top level) when the server says
};

// Arrival times in seconds from the start, [n]: 0, then cumulative exponential gaps of mean 1/rate
// drawn from a generator seeded with seed; all 0 for an infinite rate. Throws for rate <= 0.
std::vector<double> poisson_arrivals(int64_t n, double rate, uint64_t seed);

// The JSON body of request i: a streaming chat (one user message) or completion of prompt.
std::string request_body(const HttpRequestOptions& options, const std::string& prompt, int64_t i);

// GET /v1/models. Throws dspark::Error (one line naming the URL) when the server cannot be reached,
// or when it lists no model and model_name is empty; otherwise model_name wins over the listing.
ServerInfo fetch_server_info(const HttpEndpoint& endpoint, const std::string& model_name);

ServerCounters scrape_counters(const HttpEndpoint& endpoint);

// One request on its own, as vLLM's benchmark starts: throws dspark::Error with the server's answer
// when it fails, so a wrong model name or endpoint stops the run before any load.
void check_one_request(const HttpEndpoint& endpoint, const HttpRequestOptions& options, const std::string& prompt);

// The load over prompts (not empty), with /metrics read before and after.
HttpRun run_http_load(const HttpEndpoint& endpoint, const HttpRequestOptions& options,
                      const std::vector<std::string>& prompts, const HttpLoad& load);

}  // namespace dspark::bench
