#include "serve/engine_service.h"

#include <cstdio>

#include "common/error.h"
#include "model/threads.h"

namespace dspark::serve {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// How long the idle engine thread sleeps between looks at the clock (the dashboard's series keeps
// its once-a-second points while nothing runs).
constexpr auto kIdleWake = std::chrono::milliseconds(250);

// The engine as a server runs it: the requests in a step are other clients', so one whose token
// choice fails (NaN logits, say) fails alone.
engine::EngineOptions serving(engine::EngineOptions options) {
  options.fail_requests_alone = true;
  return options;
}

}  // namespace

RequestChannel::Update RequestChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !tokens_.empty() || (outcome_ && !delivered_); });
  Update update;
  update.tokens.swap(tokens_);
  if (outcome_ && !delivered_) {
    update.outcome = *outcome_;
    delivered_ = true;
  }
  return update;
}

void RequestChannel::push(int64_t token) {
  std::lock_guard lock(mutex_);
  tokens_.push_back(token);
}

void RequestChannel::finish(engine::RequestOutcome outcome) {
  {
    std::lock_guard lock(mutex_);
    outcome_ = std::move(outcome);
  }
  ready_.notify_all();
}

EngineService::EngineService(model::Transformer& target, draft::Drafter* drafter, engine::EngineOptions options,
                             int64_t max_queue, ServerMetrics& metrics)
    : engine_(target, drafter, serving(options)), capacity_(options.max_concurrency + max_queue), metrics_(metrics) {
  // OpenMP's thread count is per thread: a new thread starts from the runtime's default, not from
  // what --threads set on the main thread, so the engine thread sets it again.
  const int threads = model::num_threads();
  model::release_idle_threads();
  thread_ = std::thread([this, threads] {
    model::set_num_threads(threads);
    loop();
  });
}

EngineService::~EngineService() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<std::shared_ptr<RequestChannel>> EngineService::submit(std::vector<engine::EngineRequest> requests,
                                                                    const std::string& label) {
  const int64_t n = static_cast<int64_t>(requests.size());
  for (const engine::EngineRequest& r : requests) engine::check_request(r, limits());
  if (n > capacity_)
    throw Error(std::to_string(n) + " choices are more requests than the server holds at once (" +
                std::to_string(capacity_) + ": --max-concurrency plus --max-queue)");
  std::vector<std::shared_ptr<RequestChannel>> channels;
  {
    std::lock_guard lock(mutex_);
    if (draining_ || stop_) throw ShuttingDown();
    if (in_engine_ + static_cast<int64_t>(inbox_.size()) + n > capacity_) throw QueueFull();
    for (int64_t i = 0; i < n; ++i) {
      channels.push_back(std::make_shared<RequestChannel>());
      inbox_.push_back({std::move(requests[i]), channels.back(), n == 1 ? label : label + "/" + std::to_string(i)});
    }
  }
  wake_.notify_all();
  return channels;
}

int64_t EngineService::drain(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  {
    std::unique_lock lock(mutex_);
    draining_ = true;
    // The engine thread publishes its state after every step and while idle.
    wake_.wait_until(lock, deadline, [&] { return inbox_.empty() && !engine_busy_; });
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return cancelled_at_stop_;
}

void EngineService::publish_state() {
  {
    std::lock_guard lock(mutex_);
    in_engine_ = engine_.n_active() + engine_.n_waiting();
    engine_busy_ = !engine_.idle();
  }
  wake_.notify_all();
}

void EngineService::admit_inbox() {
  std::deque<Submitted> inbox;
  {
    std::lock_guard lock(mutex_);
    inbox.swap(inbox_);
    in_engine_ += static_cast<int64_t>(inbox.size());
  }
  const auto now = Clock::now();
  for (auto& [request, channel, label] : inbox) {
    if (channel->cancelled()) {  // the client left before the engine saw it
      channel->finish({.finish_reason = "cancelled"});
      continue;
    }
    // The callback holds the channel: a handler that gives up never leaves it dangling.
    request.on_token = [this, channel = channel](int64_t token) {
      if (channel->cancelled()) return false;
      channel->push(token);
      ++channel->produced_;
      ++tokens_this_step_;
      return true;
    };
    try {
      const int64_t id = engine_.submit(std::move(request));
      tracked_[id] = {.channel = std::move(channel), .label = std::move(label), .submitted = now, .seen = 0,
                      .last_output = now};
    } catch (const Error& e) {  // checked in submit() already; kept so one request cannot stop the loop
      channel->finish({.text = e.what(), .finish_reason = "error"});
    }
  }
}

// TTFT when a request's first tokens came out of this step; otherwise the time since its last
// step with output (vLLM's inter-token latency: a step that commits several tokens is one gap).
void EngineService::observe_latencies(Clock::time_point now) {
  for (auto& [id, t] : tracked_) {
    const int64_t produced = t.channel->produced_;
    if (produced == t.seen) continue;
    t.channel->notify();
    if (t.seen == 0)
      metrics_.on_first_token(seconds_between(t.submitted, now));
    else
      metrics_.on_inter_token(seconds_between(t.last_output, now));
    t.seen = produced;
    t.last_output = now;
  }
}

void EngineService::run_step() {
  for (auto& [id, t] : tracked_)
    if (t.channel->cancelled()) engine_.cancel(id);
  tokens_this_step_ = 0;
  std::vector<engine::RequestOutcome> finished = engine_.step();
  // Before any handler hears its request finished: a client that sends its next request at once
  // must find the place it freed.
  publish_state();
  observe_latencies(Clock::now());
  for (engine::RequestOutcome& o : finished) {
    auto it = tracked_.find(o.id);
    metrics_.on_finished(o, it == tracked_.end() ? "" : it->second.label);
    if (it == tracked_.end()) continue;
    it->second.channel->finish(std::move(o));
    tracked_.erase(it);
  }
  const engine::StepCostDrift* drift = engine_.step_cost_drift();
  metrics_.on_step({.stats = engine_.stats(),
                    .estimate = engine_.policy().last_estimate(),
                    .running = engine_.n_active(),
                    .waiting = engine_.n_waiting(),
                    .kv_usage = engine_.kv_cache_usage(),
                    .new_tokens = tokens_this_step_,
                    .draft_cost_scale = drift ? drift->draft_scale() : 1.0,
                    .verify_cost_scale = drift ? drift->verify_scale() : 1.0});
}

// A step that throws is the server's fault, not one request's: every request in flight ends with
// the error (its handler answers 500, or an error event mid-stream), and the engine drops them.
void EngineService::fail_all(const std::string& message) {
  for (auto& [id, t] : tracked_) {
    t.channel->cancel();
    engine_.cancel(id);
    t.channel->finish({.id = id, .text = message, .finish_reason = "error"});
  }
  tracked_.clear();
}

// Stopping: what is still in flight is cancelled at the next step boundary and its handler told.
void EngineService::cancel_everything() {
  cancelled_at_stop_ = static_cast<int64_t>(tracked_.size());
  for (auto& [id, t] : tracked_) engine_.cancel(id);
  while (!engine_.idle())
    for (engine::RequestOutcome& o : engine_.step()) {
      auto it = tracked_.find(o.id);
      metrics_.on_finished(o, it == tracked_.end() ? "" : it->second.label);
      if (it != tracked_.end()) it->second.channel->finish(std::move(o));
    }
  tracked_.clear();
  std::lock_guard lock(mutex_);
  cancelled_at_stop_ += static_cast<int64_t>(inbox_.size());
  for (Submitted& s : inbox_) s.channel->finish({.finish_reason = "cancelled"});
  inbox_.clear();
}

void EngineService::loop() {
  for (;;) {
    publish_state();
    {
      std::unique_lock lock(mutex_);
      if (stop_) break;
      if (inbox_.empty() && engine_.idle()) {
        wake_.wait_for(lock, kIdleWake, [&] { return stop_ || !inbox_.empty(); });
        if (stop_) break;
        if (inbox_.empty()) {
          lock.unlock();
          metrics_.on_idle(0);
          continue;
        }
      }
    }
    try {
      admit_inbox();
      run_step();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dspark serve: engine step failed: %s\n", e.what());
      fail_all(e.what());
    }
  }
  cancel_everything();
}

}  // namespace dspark::serve
