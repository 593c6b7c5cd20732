// What the server measures, for GET /metrics (Prometheus text with vLLM's names, so `vllm bench
// serve` and existing Grafana boards read it) and GET /stats (the dashboard's JSON). Written by the
// engine thread (EngineService) after every step and every finished request, read by HTTP threads;
// one mutex, held for microseconds.
//
// Names (vLLM's, `vllm:` prefix, label model_name): num_requests_running, num_requests_waiting,
// kv_cache_usage_perc, prompt_tokens_total, generation_tokens_total,
// request_success_total{finished_reason}, the histograms time_to_first_token_seconds,
// inter_token_latency_seconds, request_time_per_output_token_seconds, e2e_request_latency_seconds,
// request_queue_time_seconds, and spec_decode_num_drafts_total, _num_draft_tokens_total,
// _num_accepted_tokens_total, _num_accepted_tokens_per_pos_total{position}. Ours (`dspark:`): the
// verification budget per step, the drafting share of step time, the SPS estimate and dspark-async's
// capacity K over the last second, and the counters they are rates of.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace dspark::serve {

struct ServerInfo {
  std::string model;              // the id clients send
  std::string drafter;            // empty without one
  std::string schedule;
  int64_t gamma = 0;
  int64_t max_concurrency = 0;
};

// Cumulative counts of observations at or below each bound (Prometheus' `le`).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void observe(double value);
  void write(std::string& out, const std::string& name, const std::string& labels) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, not cumulative (made cumulative when written)
  uint64_t count_ = 0;
  double sum_ = 0;
};

// The engine's state after one step.
struct StepSample {
  engine::EngineStats stats;  // cumulative
  schedule::VerificationPolicy::StepEstimate estimate;
  int64_t running = 0, waiting = 0;
  double kv_usage = 0;
  int64_t new_tokens = 0;     // output tokens committed in the step
  // The factors the engine scales its step-cost profile by (engine/step_cost_drift.h); 1 without.
  double draft_cost_scale = 1, verify_cost_scale = 1;
};

class ServerMetrics {
 public:
  explicit ServerMetrics(ServerInfo info);

  // Engine thread.
  void on_step(const StepSample& sample);
  void on_first_token(double seconds_from_submission);
  void on_inter_token(double seconds);
  void on_finished(const engine::RequestOutcome& outcome, const std::string& label);
  void on_idle(int64_t waiting);  // keeps the once-a-second series going while nothing runs

  // HTTP threads.
  std::string prometheus() const;
  nlohmann::json stats() const;
  const ServerInfo& info() const { return info_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Sample {              // one point of the dashboard's series
    double t = 0, tokens_per_s = 0, user_tokens_per_s = 0, requests_per_s = 0;
    double running = 0;   // mean over the second's steps (the rates beside it are over the second too)
    int64_t waiting = 0;  // at the end of the second
    double budget_per_step = 0, draft_share = 0, acceptance_length = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(Sample, t, tokens_per_s, user_tokens_per_s, requests_per_s, running, waiting,
                                   budget_per_step, draft_share, acceptance_length)
  };
  struct Recent {
    std::string id;  // the response id
    double finished_s = 0;
    int64_t prompt_tokens = 0, completion_tokens = 0;
    std::string finish_reason;
    double acceptance_length = 0, acceptance_rate = 0, tokens_per_s = 0, ttft_ms = 0;
    NLOHMANN_DEFINE_TYPE_INTRUSIVE(Recent, id, finished_s, prompt_tokens, completion_tokens, finish_reason,
                                   acceptance_length, acceptance_rate, tokens_per_s, ttft_ms)
  };
  void maybe_sample(Clock::time_point now);
  double uptime(Clock::time_point now) const;

  const ServerInfo info_;
  const Clock::time_point start_;
  mutable std::mutex mutex_;
  // Gauges, as of the last step.
  StepSample last_;
  // Counters.
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, finished_ = 0;
  std::map<std::string, int64_t> finished_by_reason_;
  engine::RequestStats spec_;  // the speculative counters, pooled over finished requests
  Histogram ttft_, itl_, tpot_, e2e_, queue_;
  // The series: one sample a second, the last 300.
  std::deque<Sample> series_;
  Clock::time_point last_sample_time_;
  StepSample at_last_sample_;
  int64_t tokens_at_last_sample_ = 0, finished_at_last_sample_ = 0;
  double running_sum_ = 0;  // running requests summed over the steps since the last sample
  int64_t steps_since_sample_ = 0;
  std::deque<Recent> recent_;  // newest first, at most 20
};

}  // namespace dspark::serve
