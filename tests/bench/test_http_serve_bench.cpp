// The HTTP load driver of `bench serve --url` against a scripted OpenAI-style server on loopback
// (httplib::Server in this process): what it sends, what it records, the concurrency cap, the
// /metrics difference, and each way a request or the whole run can fail.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/http_serve_bench.h"
#include "common/error.h"
#include "expect_error.h"
#include "serve/server_process.h"
#include "test_util.h"

namespace dspark::bench {
namespace {

using nlohmann::json;

std::string sse(const json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

json content_chunk(const std::string& text) {
  return {{"choices", json::array({{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}}})}};
}

// A server that streams max_tokens tokens two per chunk, as a speculative server does, and adds
// fixed amounts to its speculative counters per served request. The prompt scripts failures:
// "fail" answers HTTP 500, "error-event" breaks off with an error event, "stall" trickles
// keep-alive comments for up to 3 s.
class FakeServer {
 public:
  FakeServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"fake-model","metadata":{"schedule":"fake-schedule"}}]})",
                      "application/json");
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mutex_);
      res.set_content("vllm:spec_decode_num_drafts_total " + std::to_string(2 * served_) +
                          "\nvllm:spec_decode_num_draft_tokens_total " + std::to_string(6 * served_) +
                          "\nvllm:spec_decode_num_accepted_tokens_total " + std::to_string(3 * served_) +
                          "\nvllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} " +
                          std::to_string(2 * served_) + "\ndspark:verified_draft_tokens_total " +
                          std::to_string(6 * served_) + "\ndspark:decode_request_steps_total " +
                          std::to_string(4 * served_) + "\n",
                      "text/plain");
    });
    server_.Post("/v1/chat/completions",
                 [this](const httplib::Request& req, httplib::Response& res) { complete(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the accept loop runs would be lost, and join() would then wait forever.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() { stop(); }
  void stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int max_in_flight() const { return max_in_flight_; }
  std::vector<json> bodies() {
    std::lock_guard<std::mutex> lock(mutex_);
    return bodies_;
  }

 private:
  void complete(const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body);
    const std::string prompt = body["messages"][0]["content"];
    {
      std::lock_guard<std::mutex> lock(mutex_);
      bodies_.push_back(body);
    }
    if (prompt == "fail") {
      res.status = 500;
      res.set_content(R"({"error":{"message":"boom","type":"server_error"}})", "application/json");
      return;
    }
    const int n_tokens = body["max_tokens"];
    const int now = ++in_flight_;
    for (int seen = max_in_flight_; now > seen && !max_in_flight_.compare_exchange_weak(seen, now);) {}
    res.set_chunked_content_provider("text/event-stream", [this, prompt, n_tokens](size_t, httplib::DataSink& sink) {
      const bool ok = stream(prompt, n_tokens, sink);
      --in_flight_;
      if (ok) sink.done();
      return ok;
    });
  }

  bool stream(const std::string& prompt, int n_tokens, httplib::DataSink& sink) {
    auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    if (prompt == "stall") {
      for (int i = 0; i < 150; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!send(": still thinking\n\n")) return false;
      }
      return false;
    }
    send(sse({{"choices", json::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}}})}}));
    if (prompt == "error-event") {
      send(sse(content_chunk("x")));
      send(sse({{"error", {{"message", "engine failed"}, {"type", "server_error"}}}}));
      return true;
    }
    for (int t = 0; t < n_tokens; t += 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // so that streams overlap
      send(sse(content_chunk(t + 1 < n_tokens ? "ab" : "a")));
    }
    send(sse({{"choices", json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "length"}}})}}));
    send(sse({{"choices", json::array()}, {"usage", {{"prompt_tokens", 3}, {"completion_tokens", n_tokens}}}}));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++served_;
    }
    return send("data: [DONE]\n\n");
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mutex_;
  std::vector<json> bodies_;
  int served_ = 0;
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
};

TEST(HttpServeBench, ReadsTheModelAndScheduleFromTheListing) {
  FakeServer server;
  const ServerInfo info = fetch_server_info({.url = server.url() + "/"}, "");
  EXPECT_EQ(info.model, "fake-model");
  EXPECT_EQ(info.schedule, "fake-schedule");
  EXPECT_EQ(fetch_server_info({.url = server.url()}, "mine").model, "mine");
}

TEST(HttpServeBench, UnreachableServerIsOneErrorLine) {
  FakeServer server;
  const std::string url = server.url();
  server.stop();  // nothing listens on the port now
  test::expect_error([&] { fetch_server_info({.url = url, .timeout_s = 5}, ""); }, {"cannot reach", url});
  test::expect_error([&] { fetch_server_info({.url = "127.0.0.1:8080"}, ""); }, {"--url", "http://HOST:PORT"});
}

// An OpenAI client's base URL (ending in /v1) names the same server (it was asked for
// /v1/v1/models, then told to pass --model-name); a server that wants a key says so.
TEST(HttpServeBench, TakesAnOpenAiBaseUrlAndNamesAMissingApiKey) {
  FakeServer server;
  EXPECT_EQ(fetch_server_info({.url = server.url() + "/v1"}, "").model, "fake-model");
  EXPECT_EQ(fetch_server_info({.url = server.url() + "/v1/"}, "").model, "fake-model");
  httplib::Server guarded;
  guarded.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
    res.status = 401;
    res.set_content(R"({"error":{"message":"missing or wrong API key","type":"authentication_error"}})", "application/json");
  });
  const int port = guarded.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { guarded.listen_after_bind(); });
  while (!guarded.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  test::expect_error([&] { fetch_server_info({.url = "http://127.0.0.1:" + std::to_string(port)}, ""); },
                     {"HTTP 401", "--api-key"});
  guarded.stop();
  thread.join();
}

// Closed loop, 2 clients, 6 requests over prompts {a, fail, b}: requests 1 and 4 fail with the
// server's answer, the other four stream 5 tokens each in 3 chunks; the server never sees more
// than 2 at once; the counters' difference is what the four successes added.
TEST(HttpServeBench, ClosedLoopRecordsEveryRequest) {
  FakeServer server;
  const HttpRequestOptions o{.model = "fake-model", .max_tokens = 5, .seed = 100};
  const HttpRun run = run_http_load({.url = server.url()}, o, {"a", "fail", "b"},
                                    {.max_concurrency = 2, .num_requests = 6});
  ASSERT_EQ(run.records.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const RequestRecord& r = run.records[i];
    if (i % 3 == 1) {
      EXPECT_FALSE(r.success);
      EXPECT_NE(r.error.find("HTTP 500"), std::string::npos) << r.error;
      EXPECT_NE(r.error.find("boom"), std::string::npos) << r.error;
      continue;
    }
    EXPECT_TRUE(r.success) << i << ": " << r.error;
    EXPECT_EQ(r.output_tokens, 5);
    EXPECT_TRUE(r.usage_reported);
    EXPECT_EQ(r.content_chunks, 3);
    EXPECT_EQ(r.itl_s.size(), 2u);
    EXPECT_EQ(r.prompt_tokens, 3);
    EXPECT_LE(r.ttft_s, r.last_token_s);
    EXPECT_LE(r.last_token_s, r.e2el_s);
  }
  EXPECT_LE(server.max_in_flight(), 2);
  EXPECT_GE(server.max_in_flight(), 1);
  ASSERT_TRUE(run.counters.spec);
  EXPECT_EQ(run.counters.spec->num_drafts, 8);
  EXPECT_EQ(run.counters.spec->num_accepted_tokens, 12);
  EXPECT_EQ(run.counters.spec->accepted_per_pos, std::vector<double>{8});
  ASSERT_TRUE(run.counters.engine);
  EXPECT_EQ(run.counters.engine->mean_budget(), 1.5);  // 4 x 6 drafts over 4 x 4 request-steps
  EXPECT_GT(run.seconds, 0);
}

// Every body streams with usage, carries the model and max_tokens, and request i seeds with seed + i.
TEST(HttpServeBench, EveryRequestStreamsWithUsageAndItsOwnSeed) {
  FakeServer server;
  const HttpRequestOptions o{.model = "fake-model", .max_tokens = 4, .temperature = 0.0, .seed = 100};
  run_http_load({.url = server.url()}, o, {"a"}, {.max_concurrency = 3, .num_requests = 5});
  std::set<uint64_t> seeds;
  for (const json& body : server.bodies()) {
    EXPECT_EQ(body["stream"], true);
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
    EXPECT_EQ(body["model"], "fake-model");
    EXPECT_EQ(body["max_tokens"], 4);
    EXPECT_EQ(body["temperature"], 0.0);
    EXPECT_FALSE(body.contains("ignore_eos"));
    seeds.insert(body["seed"].get<uint64_t>());
  }
  EXPECT_EQ(seeds, (std::set<uint64_t>{100, 101, 102, 103, 104}));
}

TEST(HttpServeBench, CompletionsBodyHasAPromptAndOptionalFields) {
  const json body = json::parse(request_body({.endpoint = "completions", .model = "m", .ignore_eos = true}, "hi", 3));
  EXPECT_EQ(body["prompt"], "hi");
  EXPECT_FALSE(body.contains("messages"));
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_FALSE(body.contains("temperature"));  // unset: the server's default
  EXPECT_EQ(body["seed"], 3);
}

// Poisson arrivals at 10 per second from a fixed seed: reproducible, the first at 0, increasing,
// the mean gap near 1/10 (1000 gaps: the sample mean's spread is 3%, the bound 10%).
TEST(HttpServeBench, PoissonArrivalsAreSeeded) {
  const std::vector<double> a = poisson_arrivals(1001, 10.0, 7);
  EXPECT_EQ(a, poisson_arrivals(1001, 10.0, 7));
  EXPECT_NE(a, poisson_arrivals(1001, 10.0, 8));
  EXPECT_EQ(a.front(), 0.0);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_NEAR(a.back() / 1000, 0.1, 0.01);
  EXPECT_EQ(poisson_arrivals(3, std::numeric_limits<double>::infinity(), 7), (std::vector<double>{0, 0, 0}));
  test::expect_error([] { poisson_arrivals(3, 0.0, 7); }, {"--request-rate"});
}

// An open loop with no cap: every request gets its own client and all complete.
TEST(HttpServeBench, OpenLoopServesEveryArrival) {
  FakeServer server;
  const HttpRun run = run_http_load({.url = server.url()}, {.model = "fake-model", .max_tokens = 2}, {"a"},
                                    {.request_rate = 500, .num_requests = 4, .seed = 1});
  for (const RequestRecord& r : run.records) EXPECT_TRUE(r.success) << r.error;
}

TEST(HttpServeBench, ErrorEventAndDeadlineFailTheirRequests) {
  FakeServer server;
  const HttpRun run = run_http_load({.url = server.url(), .timeout_s = 0.3}, {.model = "fake-model"},
                                    {"error-event", "stall"}, {.num_requests = 2});
  EXPECT_FALSE(run.records[0].success);
  EXPECT_NE(run.records[0].error.find("engine failed"), std::string::npos) << run.records[0].error;
  EXPECT_FALSE(run.records[1].success);
  EXPECT_NE(run.records[1].error.find("timed out"), std::string::npos) << run.records[1].error;
}

TEST(HttpServeBench, FailingTestRequestStopsTheRun) {
  FakeServer server;
  test::expect_error([&] { check_one_request({.url = server.url()}, {.model = "fake-model"}, "fail"); },
                     {"test request", "HTTP 500", "boom"});
  check_one_request({.url = server.url()}, {.model = "fake-model", .max_tokens = 2}, "a");  // no throw
}

// End to end against a real `dspark serve` (the shipped model and its dspark drafter, `fixed`):
// the model and schedule come from /v1/models; a closed loop at C = 2 of fixed-length requests
// all complete with the server's usage; the speculative and engine counters moved; the
// completions endpoint works too.
TEST(HttpServeBench, DrivesARealDsparkServe) {
  test::ServerProcess server(test::test_server_flags(2));
  const HttpEndpoint e{.url = "http://127.0.0.1:" + std::to_string(server.port())};
  const ServerInfo info = fetch_server_info(e, "");
  EXPECT_EQ(info.model, "tiny-target-8l");
  EXPECT_EQ(info.schedule, "fixed");
  HttpRequestOptions o{.model = info.model, .max_tokens = 12, .temperature = 0.0, .ignore_eos = true};
  const HttpRun run =
      run_http_load(e, o, {"What is 2 + 3?", "Name a colour."}, {.max_concurrency = 2, .num_requests = 4});
  for (const RequestRecord& r : run.records) {
    EXPECT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 12);
    EXPECT_TRUE(r.usage_reported);
    EXPECT_GT(r.prompt_tokens, 0);
    EXPECT_GE(r.content_chunks, 1);
    EXPECT_LE(r.content_chunks, 12);  // a step's accepted drafts come as one chunk
  }
  ASSERT_TRUE(run.counters.spec);
  EXPECT_GT(run.counters.spec->num_drafts, 0);
  EXPECT_LE(run.counters.spec->num_accepted_tokens, run.counters.spec->num_draft_tokens);
  ASSERT_TRUE(run.counters.engine);
  EXPECT_GT(run.counters.engine->mean_budget(), 0);  // `fixed` verifies every draft
  o.endpoint = "completions";
  check_one_request(e, o, "Once upon a time");
}

// The CLI over a real server: a sweep of two concurrencies as JSON, every request served, and the
// in-process benchmark's keys with values.
TEST(HttpServeBench, CliSweepsConcurrenciesAsJson) {
  test::ServerProcess server(test::test_server_flags(2));
  test::TempDir dir;
  test::write_text(dir / "prompts.jsonl", "{\"turns\": [\"Count to five.\"]}\n{\"turns\": [\"Say hi.\"]}\n");
  const test::CommandResult r = test::run_dspark(
      "bench serve --url http://127.0.0.1:" + std::to_string(server.port()) + " --prompts " +
      dir.file("prompts.jsonl") + " --max-concurrency 1,2 --num-prompts 3 --max-tokens 8 --ignore-eos --json" +
      " --plot-dir " + dir.file("plots"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json points = json::parse(r.out);
  ASSERT_EQ(points.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(points[i]["concurrency"], i + 1);
    EXPECT_EQ(points[i]["completed"], 3);
    EXPECT_EQ(points[i]["output_tokens"], 24);
    EXPECT_EQ(points[i]["schedule"], "fixed");
    EXPECT_GT(points[i]["aggregate_tps"].get<double>(), 0);
    EXPECT_GT(points[i]["mean_budget"].get<double>(), 0);
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "plots" / "serve_budget.svg"));
}

}  // namespace
}  // namespace dspark::bench
