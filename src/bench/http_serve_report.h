// The report of `dspark bench serve --url`: one point per load (max concurrency, request rate) as
// a Markdown table in the shape of vLLM's `bench serve` summary (a column per point) or as JSON,
// and the plots of the in-process benchmark (serve_report.h) plus the latencies.
//
// The JSON is an array of points whose keys include every key of the in-process benchmark's points
// (to_json(ServePoint)), with the same definitions where both can be measured: "concurrency" (0 for
// no cap), "requests", "output_tokens", "seconds", "aggregate_tps" (all output tokens / wall
// time), "user_tps_mean/p50/p90" (a request's output tokens / its time to its last token), and
// from dspark serve's engine counters "mean_budget" (drafts verified per request-step) and
// "draft_share" (drafting seconds / wall time); null where the server does not say (other servers;
// "acceptance_length", committed tokens per request-step, always: no server counts those). The
// server's speculative counters give vLLM's acceptance figures under "spec_decode", and the vLLM
// measures follow under their own keys ("ttft_ms": {"mean", "median", "p99"}, ...; "request_rate"
// null for inf).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/http_serve_bench.h"
#include "bench/serve_bench.h"

namespace dspark::bench {

struct HttpPoint {
  std::string label;     // the series name in tables and plots: the server's schedule, else "http"
  std::string url, model, endpoint;
  HttpLoad load;
  Slo slo;
  HttpSummary summary;
  ServerCounters counters;  // what the run added to the server's counters, where exposed
  std::vector<std::pair<std::string, int64_t>> errors;  // failure reasons and counts, most frequent first
};

// The point of one run: its summary under slo, and the most frequent failure reasons (at most 5).
HttpPoint make_http_point(const std::string& label, const HttpEndpoint& endpoint, const HttpRequestOptions& options,
                          const HttpLoad& load, const Slo& slo, const HttpRun& run);

// The point as an in-process one, for the shared plots and JSON keys (what is unknown is NaN).
ServePoint as_serve_point(const HttpPoint& point);

nlohmann::json to_json(const HttpPoint& point);
std::string http_markdown(const std::vector<HttpPoint>& points);

// The in-process plots (serve_throughput.svg; serve_budget.svg when the server reports its budget,
// as dspark serve does) and serve_latency.svg: TTFT and TPOT (median and p99) against
// concurrency (points without a concurrency cap are not drawn there).
void write_http_plots(const std::filesystem::path& dir, const std::vector<HttpPoint>& points);

}  // namespace dspark::bench
