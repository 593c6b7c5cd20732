// The measures of `dspark bench serve --url`, as pure functions over per-request records, with
// vLLM's `bench serve` definitions so numbers compare across servers and tools:
//
//   TTFT   time to first token: from sending the request to the first stream chunk with content.
//   ITL    inter-token latency: the gaps between consecutive chunks with content. A chunk that
//          carries several (speculative) tokens is one gap, so ITL measures what a reader sees.
//   TPOT   time per output token: (E2EL - TTFT) / (output tokens - 1), tokens from the server's
//          usage.completion_tokens; defined for requests with more than one token (for goodput a
//          one-token request counts as TPOT 0, as vLLM does).
//   E2EL   end-to-end latency: from sending the request to the end of its stream.
//   goodput  requests per second that met every given SLO (TTFT, TPOT, E2EL, each <= its bound).
//
// Percentiles interpolate linearly between order statistics (numpy's default, which vLLM uses).
// Aggregate and per-user throughput follow the in-process benchmark (serve_bench.h): aggregate =
// all output tokens / wall time; per-user = a request's output tokens / its time from sending to
// its last content chunk.
//
// The speculative counters come from the server's Prometheus text (`GET /metrics`), read before and
// after a run: vLLM's `vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total` and
// `..._num_accepted_tokens_per_pos_total{position="k"}`, or llama.cpp's `llamacpp:` equivalents.
// dspark serve also exposes its engine's counters (`dspark:verified_draft_tokens_total`, ...), from
// which the in-process benchmark's verification budget and drafting share follow exactly.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dspark::bench {

// What one streamed request did, as the client saw it. Times in seconds from sending the request.
struct RequestRecord {
  bool success = false;
  std::string error;               // why it failed (HTTP status and body, an error event, a timeout)
  int64_t prompt_tokens = 0;       // usage.prompt_tokens (0 when the server sent no usage)
  int64_t output_tokens = 0;       // usage.completion_tokens, else the number of content chunks
  bool usage_reported = false;     // output_tokens came from usage
  int64_t content_chunks = 0;      // chunks with content (one ITL gap between consecutive ones)
  double ttft_s = 0;               // to the first chunk with content
  double last_token_s = 0;         // to the last chunk with content
  double e2el_s = 0;               // to the end of the stream
  std::vector<double> itl_s;       // [content_chunks - 1] gaps between content chunks
};

// Service-level objectives for goodput, in milliseconds; an unset one is not checked.
struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};

// vLLM's `--goodput ttft:MS tpot:MS e2el:MS` (each "key:value" a separate word, or several in one
// word separated by spaces). Throws dspark::Error naming a bad word.
Slo parse_goodput(const std::vector<std::string>& words);

struct LatencySummary {
  double mean_ms = 0, median_ms = 0, p99_ms = 0;
};

struct HttpSummary {
  int64_t requests = 0, completed = 0, failed = 0;
  int64_t input_tokens = 0, output_tokens = 0;  // over the completed requests
  int64_t good_requests = 0;                    // completed and within every SLO
  double seconds = 0;                           // wall time of the run
  double request_throughput = 0;                // completed / s
  double output_throughput = 0;                 // output tokens / s (the in-process "aggregate")
  double total_token_throughput = 0;            // (input + output tokens) / s
  double request_goodput = 0;                   // good requests / s (0 without SLOs)
  LatencySummary ttft, tpot, itl, e2el;
  double user_tps_mean = 0, user_tps_p50 = 0, user_tps_p90 = 0;
};

// The p-th percentile (p in [0, 100]) with linear interpolation; 0 for no values.
double percentile(std::vector<double> values, double p);

// TPOT of one request in seconds: (E2EL - TTFT) / (tokens - 1); 0 with fewer than two tokens.
double request_tpot_s(const RequestRecord& r);

HttpSummary summarize(const std::vector<RequestRecord>& records, double seconds, const Slo& slo);

// One sample of Prometheus text: name{labels} value.
struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
  const std::string* label(std::string_view key) const;
};

// The samples of a Prometheus text exposition. Comments, blank lines and lines that are not a
// sample (a truncated or garbled line) are skipped: the benchmark reads other people's servers and
// the counters are a side report, not worth failing a run over.
std::vector<PromSample> parse_prometheus(std::string_view text);

// The server-wide speculative-decoding counters (vLLM's schema), summed over label sets.
struct SpecCounters {
  double num_drafts = 0;                 // verification steps that verified at least one draft token
  double num_draft_tokens = 0;           // draft tokens verified
  double num_accepted_tokens = 0;        // draft tokens accepted
  std::vector<double> accepted_per_pos;  // [positions] steps that accepted position k

  double acceptance_rate() const;         // accepted / draft tokens
  double mean_acceptance_length() const;  // 1 + accepted / drafts (vLLM's, bonus token included)
  std::vector<double> acceptance_per_pos() const;  // [positions] accepted at k / drafts
};

// The counters in a scrape: the `vllm:` family if present, else `llamacpp:`; nullopt when the
// server exposes neither (no speculation, or no /metrics).
std::optional<SpecCounters> find_spec_counters(const std::vector<PromSample>& samples);

// What a run added: after - before, position by position (a position absent before counts 0).
SpecCounters counters_delta(const SpecCounters& after, const SpecCounters& before);

// dspark serve's engine counters (engine::EngineStats), summed over label sets.
struct EngineCounters {
  double verified_draft_tokens = 0;  // dspark:verified_draft_tokens_total: drafts sent to the target
  double decode_request_steps = 0;   // dspark:decode_request_steps_total: requests verifying, summed over steps
  double draft_seconds = 0;          // dspark:draft_seconds_total: time spent drafting

  // Drafts verified per request per step: EngineStats::mean_budget, as the in-process benchmark reports it.
  double mean_budget() const;
};

// nullopt from servers that are not dspark serve.
std::optional<EngineCounters> find_engine_counters(const std::vector<PromSample>& samples);
EngineCounters counters_delta(const EngineCounters& after, const EngineCounters& before);

}  // namespace dspark::bench
