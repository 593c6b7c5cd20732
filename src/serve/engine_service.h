// The engine on its own thread, for the server's HTTP handlers (one thread per connection).
// The engine is single-threaded by design (engine/engine.h); this is the only place where other
// threads meet it. Handlers submit requests into an inbox and read each request's tokens from its
// RequestChannel; the engine thread moves the inbox into the engine between steps, runs steps while
// there is work, and pushes every committed token to its channel as the step produces it.
//
// Cancellation: a handler whose client went away calls RequestChannel::cancel(); the engine thread
// cancels that request before its next step (the engine frees its KV and drafter slots at that
// step boundary), and a streaming request is also refused its next token.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "serve/server_metrics.h"

namespace dspark::serve {

// One submitted request as its handler sees it. Thread-safe.
class RequestChannel {
 public:
  struct Update {
    std::vector<int64_t> tokens;                  // committed since the last wait
    std::optional<engine::RequestOutcome> outcome;  // set once, when the request finished
  };
  // Returns what arrived since the last call, waiting up to `timeout` for something to arrive.
  Update wait(std::chrono::milliseconds timeout);
  // The client went away: the engine drops the request at its next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class EngineService;
  // The engine thread appends each token as it is committed, and wakes the handler once per step
  // (a step that accepts several drafts is one wake-up, not one per token).
  void push(int64_t token);
  void notify() { ready_.notify_all(); }
  void finish(engine::RequestOutcome outcome);

  int64_t produced_ = 0;    // tokens pushed; the engine thread's alone

  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<int64_t> tokens_;
  std::optional<engine::RequestOutcome> outcome_;
  bool delivered_ = false;  // the outcome went out with an Update
  std::atomic<bool> cancelled_{false};
};

// The queue is full: answered 503 with Retry-After.
class QueueFull : public std::runtime_error {
 public:
  QueueFull() : std::runtime_error("the server is at capacity: too many requests are waiting; retry later") {}
};
// The server is shutting down (SIGTERM): answered 503.
class ShuttingDown : public std::runtime_error {
 public:
  ShuttingDown() : std::runtime_error("the server is shutting down") {}
};

class EngineService {
 public:
  // max_queue: requests waiting for a KV slot beyond the engine's max_concurrency running ones.
  // The engine is built here (it allocates the KV cache) and from then on used only by the
  // service's thread.
  EngineService(model::Transformer& target, draft::Drafter* drafter, engine::EngineOptions options, int64_t max_queue,
                ServerMetrics& metrics);
  ~EngineService();  // cancels what is left and joins the thread

  // Queues the choices of one HTTP request, all of them or none. Checks each (dspark::Error names
  // the problem, as it does when the choices could never all fit: more than max_concurrency +
  // max_queue), and refuses them when they do not fit now beside the requests running and waiting
  // (QueueFull) or the service drains (ShuttingDown). `label` names them in the metrics' recent
  // requests (the response id; label/i for choice i of several).
  std::vector<std::shared_ptr<RequestChannel>> submit(std::vector<engine::EngineRequest> requests,
                                                      const std::string& label = "");
  // Fixed when the engine was built, so any thread may read them.
  const engine::RequestLimits& limits() const { return engine_.limits(); }

  // SIGTERM: refuse new requests, let the running and waiting ones finish for up to `timeout`,
  // cancel the rest, stop the thread. Returns the number of requests it had to cancel.
  int64_t drain(std::chrono::milliseconds timeout);

 private:
  using Clock = std::chrono::steady_clock;
  struct Tracked {                          // a request in the engine, as the engine thread follows it
    std::shared_ptr<RequestChannel> channel;
    std::string label;
    Clock::time_point submitted;
    int64_t seen = 0;                       // tokens it had produced at the end of the last step
    Clock::time_point last_output;          // when that last step ended (inter-token latency)
  };
  void loop();
  void admit_inbox();
  void run_step();
  void observe_latencies(Clock::time_point now);
  void fail_all(const std::string& message);
  void cancel_everything();
  void publish_state();

  engine::Engine engine_;
  int64_t capacity_;                       // max_concurrency + max_queue: requests in the service at once
  ServerMetrics& metrics_;

  std::mutex mutex_;                       // guards what follows, up to tracked_
  std::condition_variable wake_;           // the engine thread: work arrived; drain(): state published
  struct Submitted {
    engine::EngineRequest request;
    std::shared_ptr<RequestChannel> channel;
    std::string label;
  };
  std::deque<Submitted> inbox_;
  // Requests in the engine (running and waiting) as last published, plus those moved into it
  // since: the inbox is counted apart, so nothing passes between the two uncounted.
  int64_t in_engine_ = 0;
  bool engine_busy_ = false;               // requests in the engine, as last published
  bool draining_ = false, stop_ = false;
  int64_t cancelled_at_stop_ = 0;

  std::map<int64_t, Tracked> tracked_;     // engine thread only: engine id -> its channel
  int64_t tokens_this_step_ = 0;           // engine thread only
  std::thread thread_;
};

}  // namespace dspark::serve
