#include "serve/server_metrics.h"

#include <cstdio>

namespace dspark::serve {

namespace {

// Bucket bounds in seconds: vLLM's, with millisecond buckets added in front because a CPU engine on
// a small model steps in a few milliseconds.
const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                            0.75,  1.0,    2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0};
const std::vector<double> kRequestBounds = {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0,
                                            15.0, 20.0, 30.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0};
constexpr size_t kSeriesLength = 300;
constexpr size_t kRecentLength = 20;

std::string number(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

// "name{labels} value\n", with the # TYPE line written by the caller.
void line(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name + "{" + labels + "} " + number(value) + "\n";
}

void type(std::string& out, const std::string& name, const char* kind, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + kind + "\n";
}

// A request without a response id, by its engine id. (Built with += : GCC 12 misreports
// `"#" + std::to_string(id)` under -Wstringop-overflow.)
std::string engine_label(int64_t id) {
  std::string label = "#";
  label += std::to_string(id);
  return label;
}

// vLLM counts a cancelled request as "abort".
std::string reason_label(const std::string& finish_reason) {
  return finish_reason == "cancelled" ? "abort" : finish_reason;
}

}  // namespace

void Histogram::observe(double value) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    if (value <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  ++count_;
  sum_ += value;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    line(out, name + "_bucket", labels + ",le=\"" + number(bounds_[i]) + "\"", static_cast<double>(cumulative));
  }
  line(out, name + "_bucket", labels + ",le=\"+Inf\"", static_cast<double>(count_));
  line(out, name + "_sum", labels, sum_);
  line(out, name + "_count", labels, static_cast<double>(count_));
}

ServerMetrics::ServerMetrics(ServerInfo info)
    : info_(std::move(info)), start_(Clock::now()), ttft_(kLatencyBounds), itl_(kLatencyBounds), tpot_(kLatencyBounds),
      e2e_(kRequestBounds), queue_(kRequestBounds), last_sample_time_(start_) {}

double ServerMetrics::uptime(Clock::time_point now) const {
  return std::chrono::duration<double>(now - start_).count();
}

void ServerMetrics::on_step(const StepSample& sample) {
  std::lock_guard lock(mutex_);
  last_ = sample;
  generation_tokens_ += sample.new_tokens;
  running_sum_ += static_cast<double>(sample.running);
  ++steps_since_sample_;
  maybe_sample(Clock::now());
}

void ServerMetrics::on_idle(int64_t waiting) {
  std::lock_guard lock(mutex_);
  last_.running = 0;
  last_.waiting = waiting;
  last_.kv_usage = 0;
  maybe_sample(Clock::now());
}

void ServerMetrics::on_first_token(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void ServerMetrics::on_inter_token(double seconds) {
  std::lock_guard lock(mutex_);
  itl_.observe(seconds);
}

void ServerMetrics::on_finished(const engine::RequestOutcome& o, const std::string& label) {
  const engine::RequestStats& s = o.stats;
  std::lock_guard lock(mutex_);
  ++finished_;
  ++finished_by_reason_[reason_label(o.finish_reason)];
  prompt_tokens_ += s.prompt_tokens;
  spec_.merge(s);
  e2e_.observe(s.seconds);
  queue_.observe(s.queued_seconds);
  if (s.generated_tokens > 1)
    tpot_.observe((s.seconds - s.first_token_seconds) / static_cast<double>(s.generated_tokens - 1));
  recent_.push_front({.id = label.empty() ? engine_label(o.id) : label,
                      .finished_s = uptime(Clock::now()),
                      .prompt_tokens = s.prompt_tokens,
                      .completion_tokens = s.generated_tokens,
                      .finish_reason = o.finish_reason,
                      .acceptance_length = s.acceptance_length(),
                      .acceptance_rate = s.acceptance_rate(),
                      .tokens_per_s = s.seconds > 0 ? static_cast<double>(s.generated_tokens) / s.seconds : 0.0,
                      .ttft_ms = 1e3 * s.first_token_seconds});
  if (recent_.size() > kRecentLength) recent_.pop_back();
}

// Once a second: rates over the past second, from the differences of the cumulative counters.
void ServerMetrics::maybe_sample(Clock::time_point now) {
  const double dt = std::chrono::duration<double>(now - last_sample_time_).count();
  if (dt < 1.0) return;
  const engine::EngineStats& a = at_last_sample_.stats;
  const engine::EngineStats& b = last_.stats;
  const double request_steps = static_cast<double>(b.decode_request_steps - a.decode_request_steps);
  const double step_seconds = (b.draft_seconds - a.draft_seconds) + (b.verify_seconds - a.verify_seconds);
  const double mean_running = steps_since_sample_ ? running_sum_ / static_cast<double>(steps_since_sample_) : 0.0;
  Sample s;
  s.t = uptime(now);
  s.tokens_per_s = static_cast<double>(generation_tokens_ - tokens_at_last_sample_) / dt;
  s.user_tokens_per_s = mean_running > 0 ? s.tokens_per_s / mean_running : 0.0;
  s.requests_per_s = static_cast<double>(finished_ - finished_at_last_sample_) / dt;
  s.running = mean_running;
  s.waiting = last_.waiting;
  s.budget_per_step = request_steps > 0 ? static_cast<double>(b.verified_drafts - a.verified_drafts) / request_steps : 0.0;
  s.draft_share = step_seconds > 0 ? (b.draft_seconds - a.draft_seconds) / step_seconds : 0.0;
  s.acceptance_length = request_steps > 0 ? static_cast<double>(b.committed - a.committed) / request_steps : 0.0;
  series_.push_back(s);
  if (series_.size() > kSeriesLength) series_.pop_front();
  last_sample_time_ = now;
  at_last_sample_ = last_;
  tokens_at_last_sample_ = generation_tokens_;
  finished_at_last_sample_ = finished_;
  running_sum_ = 0;
  steps_since_sample_ = 0;
}

std::string ServerMetrics::prometheus() const {
  std::lock_guard lock(mutex_);
  const std::string model = "model_name=\"" + info_.model + "\"";
  const Sample last_second = series_.empty() ? Sample{} : series_.back();
  std::string out;
  auto gauge = [&](const std::string& name, const char* help, double value) {
    type(out, name, "gauge", help);
    line(out, name, model, value);
  };
  auto counter = [&](const std::string& name, const char* help, double value) {
    type(out, name, "counter", help);
    line(out, name, model, value);
  };
  gauge("vllm:num_requests_running", "Requests decoding or prefilling.", static_cast<double>(last_.running));
  gauge("vllm:num_requests_waiting", "Requests waiting for a KV slot.", static_cast<double>(last_.waiting));
  gauge("vllm:kv_cache_usage_perc", "KV-cache positions in use, 0 to 1.", last_.kv_usage);
  counter("vllm:prompt_tokens_total", "Prompt tokens of finished requests.", static_cast<double>(prompt_tokens_));
  counter("vllm:generation_tokens_total", "Output tokens generated.", static_cast<double>(generation_tokens_));
  type(out, "vllm:request_success_total", "counter", "Finished requests by finish reason.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = finished_by_reason_.find(reason);
    line(out, "vllm:request_success_total", model + ",finished_reason=\"" + reason + "\"",
         it == finished_by_reason_.end() ? 0.0 : static_cast<double>(it->second));
  }
  auto histogram = [&](const std::string& name, const char* help, const Histogram& h) {
    type(out, name, "histogram", help);
    h.write(out, name, model);
  };
  histogram("vllm:time_to_first_token_seconds", "Time to first token.", ttft_);
  histogram("vllm:inter_token_latency_seconds", "Time between a request's successive engine steps with output.", itl_);
  histogram("vllm:request_time_per_output_token_seconds", "(e2e - TTFT) / (output tokens - 1) per request.", tpot_);
  histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency.", e2e_);
  histogram("vllm:request_queue_time_seconds", "Time waiting for a KV slot.", queue_);
  counter("vllm:spec_decode_num_drafts_total", "Decode steps that verified at least one draft token.",
          static_cast<double>(spec_.num_drafts));
  counter("vllm:spec_decode_num_draft_tokens_total", "Draft tokens verified.", static_cast<double>(spec_.num_draft_tokens));
  counter("vllm:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.",
          static_cast<double>(spec_.num_accepted_tokens));
  type(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Draft tokens accepted at each position.");
  for (size_t k = 0; k < spec_.num_accepted_tokens_per_pos.size(); ++k)
    line(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", model + ",position=\"" + std::to_string(k) + "\"",
         static_cast<double>(spec_.num_accepted_tokens_per_pos[k]));
  gauge("dspark:verification_budget_per_step", "Draft tokens verified per request per step, over the last second.",
        last_second.budget_per_step);
  gauge("dspark:draft_time_share", "Share of step time spent drafting, over the last second.", last_second.draft_share);
  gauge("dspark:sps_estimate", "The steps per second SPS(B) the last step was planned with (its B; the profile rescaled).",
        last_.estimate.sps);
  gauge("dspark:draft_cost_scale", "Measured / profiled time of the drafting call, median of the last 31 steps.",
        last_.draft_cost_scale);
  gauge("dspark:verify_cost_scale", "Measured / profiled time of the rest of a step, median of the last 31 steps.",
        last_.verify_cost_scale);
  gauge("dspark:capacity_k", "dspark-async's verification capacity K of the last step (-1: other schedules).",
        static_cast<double>(last_.estimate.capacity));
  counter("dspark:engine_steps_total", "Engine steps.", static_cast<double>(last_.stats.steps));
  counter("dspark:verified_draft_tokens_total", "Draft tokens sent to the target.",
          static_cast<double>(last_.stats.verified_drafts));
  counter("dspark:decode_request_steps_total", "Requests verifying, summed over steps.",
          static_cast<double>(last_.stats.decode_request_steps));
  counter("dspark:draft_seconds_total", "Seconds spent drafting.", last_.stats.draft_seconds);
  counter("dspark:step_seconds_total", "Seconds spent in engine steps.", last_.stats.draft_seconds + last_.stats.verify_seconds);
  return out;
}

nlohmann::json ServerMetrics::stats() const {
  std::lock_guard lock(mutex_);
  const Sample last_second = series_.empty() ? Sample{} : series_.back();
  return {{"model", info_.model},
          {"drafter", info_.drafter.empty() ? nlohmann::json() : nlohmann::json(info_.drafter)},
          {"schedule", info_.schedule},
          {"gamma", info_.gamma},
          {"max_concurrency", info_.max_concurrency},
          {"uptime_s", uptime(Clock::now())},
          {"now",
           {{"running", last_.running},
            {"waiting", last_.waiting},
            {"kv_usage", last_.kv_usage},
            {"budget_per_step", last_second.budget_per_step},
            {"draft_share", last_second.draft_share},
            {"sps_estimate", last_.estimate.sps > 0 ? nlohmann::json(last_.estimate.sps) : nlohmann::json()},
            {"capacity_k", last_.estimate.capacity >= 0 ? nlohmann::json(last_.estimate.capacity) : nlohmann::json()}}},
          {"totals",
           {{"requests", finished_},
            {"prompt_tokens", prompt_tokens_},
            {"generation_tokens", generation_tokens_},
            {"num_drafts", spec_.num_drafts},
            {"num_draft_tokens", spec_.num_draft_tokens},
            {"num_accepted_tokens", spec_.num_accepted_tokens},
            {"mean_acceptance_length", spec_.mean_acceptance_length()},
            {"accepted_per_pos", spec_.num_accepted_tokens_per_pos},
            {"acceptance_per_pos", spec_.accepted_per_draft()}}},
          {"series", series_},   // each Sample and Recent with its field names as keys
          {"recent", recent_}};
}

}  // namespace dspark::serve
