// Faults against a real `dspark serve`: clients that hang up mid-stream, a thousand malformed or
// mutated bodies, a client that sends its headers byte by byte, SIGTERM in the middle of load, and
// the error envelope of each refusal.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "serve/server_process.h"

namespace dspark::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

json chat(const std::string& content, int64_t max_tokens, bool stream = false) {
  json body = {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", max_tokens}, {"temperature", 0}};
  if (stream) body["stream"] = true;
  return body;
}

std::optional<json> post(httplib::Client& c, const std::string& path, const std::string& body, int* status = nullptr) {
  auto res = c.Post(path, body, "application/json");
  if (!res) return std::nullopt;
  if (status) *status = res->status;
  try {
    return json::parse(res->body);
  } catch (const json::exception&) {
    return json();
  }
}

TEST(ServeFaults, ErrorsUseTheOpenAiEnvelopeAndStatus) {
  ServerProcess server(test_server_flags(4, {"--api-key", "sekrit", "--max-body-bytes", "4096"}));
  httplib::Client c = server.client();
  httplib::Headers auth = {{"Authorization", "Bearer sekrit"}};
  EXPECT_EQ(c.Get("/health")->status, 200);  // open without the key
  auto no_key = c.Post("/v1/chat/completions", chat("hi", 4).dump(), "application/json");
  EXPECT_EQ(no_key->status, 401);
  EXPECT_EQ(json::parse(no_key->body)["error"]["type"], "authentication_error");
  c.set_default_headers(auth);
  struct Case {
    std::string path, body;
    int status;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", "{oops", 400},
      {"/v1/chat/completions", R"({"messages": []})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "temperature": -1})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "model": "gpt-9"})", 404},
      {"/v1/completions", R"({"prompt": "hi", "max_tokens": 100000})", 400},
      {"/v1/nothing", "{}", 404},
      {"/v1/chat/completions", std::string(5000, ' '), 413},
  };
  for (const Case& k : cases) {
    int status = 0;
    const std::optional<json> body = post(c, k.path, k.body, &status);
    ASSERT_TRUE(body) << k.body.substr(0, 80);
    EXPECT_EQ(status, k.status) << k.body.substr(0, 80);
    EXPECT_TRUE((*body)["error"]["message"].is_string()) << body->dump();
    EXPECT_EQ((*body)["error"]["code"], k.status) << body->dump();
    if (k.status == 404) {  // the type the docs' table gives
      EXPECT_EQ((*body)["error"]["type"], "not_found_error") << body->dump();
    }
  }
  // The context error states both numbers.
  int status = 0;
  const json e = *post(c, "/v1/completions", R"({"prompt": "hi", "max_tokens": 100000})", &status);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("100000"), std::string::npos) << e.dump();
  EXPECT_NE(e["error"]["message"].get<std::string>().find("512"), std::string::npos) << e.dump();
}

TEST(ServeFaults, AFullQueueAnswers503WithRetryAfter) {
  // One request decodes and one waits; the rest are refused, however close together they arrive
  // (requests on their way from the service's inbox into the engine are counted). The first long
  // request is sent alone and seen running before the other seven go at once.
  ServerProcess server(test_server_flags(1, {"--max-queue", "1"}));
  constexpr int kRequests = 8;
  std::vector<int> status(kRequests, 0);
  std::vector<std::string> retry_after(kRequests), error_type(kRequests);
  std::vector<std::thread> threads;
  const auto send = [&](int i) {
    threads.emplace_back([&, i] {
      httplib::Client c = server.client();
      json body = chat("long story " + std::to_string(i), 450);
      body["ignore_eos"] = true;
      auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
      if (!res) return;
      status[i] = res->status;
      retry_after[i] = res->get_header_value("Retry-After");
      if (res->status != 200) error_type[i] = json::parse(res->body)["error"]["type"];
    });
  };
  send(0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (server.metric("vllm:num_requests_running").value_or(0) < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(server.metric("vllm:num_requests_running").value_or(0), 1) << "the first request never started";
  for (int i = 1; i < kRequests; ++i) send(i);
  for (auto& t : threads) t.join();
  int refused = 0;
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_TRUE(status[i] == 200 || status[i] == 503) << status[i];
    if (status[i] != 503) continue;
    ++refused;
    EXPECT_EQ(retry_after[i], "1");
    EXPECT_EQ(error_type[i], "unavailable_error");
  }
  EXPECT_EQ(kRequests - refused, 2);  // the running one and the waiting one
}

// A known path asked with the wrong method, a browser's preflight, a parameter of the wrong type, a
// temperature too small to divide by (it once aborted the server) and more choices than the server
// could ever hold at once: each answered for what it is.
TEST(ServeFaults, MethodsPreflightTemperaturesAndChoicesBeyondCapacity) {
  ServerProcess server(test_server_flags(2, {"--max-queue", "2"}));
  httplib::Client c = server.client();
  auto get = c.Get("/v1/completions");
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  EXPECT_EQ(json::parse(get->body)["error"]["type"], "invalid_request_error");
  auto remove = c.Delete("/v1/models/tiny-target-8l");  // a route with a parameter: 405 too
  EXPECT_EQ(remove->status, 405);
  EXPECT_EQ(remove->get_header_value("Allow"), "GET, HEAD");
  auto preflight = c.Options("/v1/chat/completions");
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_NE(preflight->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  int status = 0;
  const json pieces = *post(c, "/tokenize", R"({"content": "a", "with_pieces": "x"})", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(pieces["error"]["param"], "with_pieces");
  json tiny = chat("hi", 4);
  tiny["temperature"] = 1e-38;
  EXPECT_EQ((*post(c, "/v1/chat/completions", tiny.dump(), &status))["object"], "chat.completion");
  EXPECT_EQ(status, 200);
  // Two running and two waiting: four choices fit, five never would (a 400, not a 503 to retry).
  json body = chat("hi", 2);
  body["n"] = 4;
  EXPECT_EQ((*post(c, "/v1/chat/completions", body.dump(), &status))["choices"].size(), 4u);
  EXPECT_EQ(status, 200);
  body["n"] = 5;
  const json five = *post(c, "/v1/chat/completions", body.dump(), &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(five["error"]["message"].get<std::string>().find("(4:"), std::string::npos) << five.dump();
}

TEST(ServeFaults, ClientsThatHangUpMidStreamAreCancelledAndOthersFinish) {
  ServerProcess server(test_server_flags(16));
  constexpr int kClients = 40, kLeavers = 8;  // 20% hang up after three events
  std::atomic<int> completed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      httplib::Client c = server.client();
      const bool leaves = i % 5 == 0;
      json body = chat("Tell me a long story about a dragon number " + std::to_string(i), leaves ? 400 : 32, true);
      body["ignore_eos"] = true;
      const StreamResult r = stream_request(c, "/v1/chat/completions", body, leaves ? 3 : 0);
      if (!leaves && r.done) ++completed;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(completed.load(), kClients - kLeavers);
  // The leavers' requests (400 tokens each) were cancelled, not run to the end: they show up as
  // aborted, and nothing is left running.
  std::optional<double> aborted, running;
  for (int i = 0; i < 50; ++i) {
    aborted = server.metric("vllm:request_success_total{model_name=\"tiny-target-8l\",finished_reason=\"abort\"}");
    running = server.metric("vllm:num_requests_running");
    if (aborted == kLeavers && running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(aborted, kLeavers);
  EXPECT_EQ(running, 0);
  EXPECT_EQ(server.metric("vllm:request_success_total{model_name=\"tiny-target-8l\",finished_reason=\"length\"}"),
            kClients - kLeavers);
}

// Bodies that are wrong for certain, each a different way: truncated, invalid UTF-8, wrong types,
// huge numbers, unknown keys, garbage bytes, nesting.
std::string mutated_body(std::mt19937& rng, int i) {
  const std::string valid =
      R"({"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8, "temperature": 0.5, "top_p": 0.9, "seed": 7, "stream": false})";
  std::uniform_int_distribution<size_t> pos(1, valid.size() - 2);
  switch (i % 8) {
    case 0: return valid.substr(0, pos(rng));  // cut before the closing brace
    case 1: {                                   // a byte that is never valid UTF-8, inside the content
      std::string b = valid;
      b.insert(b.find("hello") + 2, 1, static_cast<char>(0xF8 + rng() % 8));
      return b;
    }
    case 2: {  // a wrong type for one parameter
      const std::vector<std::string> keys = {"max_tokens", "temperature", "top_p", "seed", "stream"};
      const std::string key = keys[rng() % keys.size()];
      json j = json::parse(valid);
      j[key] = (rng() % 2) ? json("12") : json::array({1});
      return j.dump();
    }
    case 3: {  // huge or out-of-range numbers
      const std::vector<std::string> values = {"1e308", "-1", "99999999999999999999999", "1.5", "-1e-300"};
      const std::vector<std::string> keys = {"n", "min_p"};  // absent from `valid`: no duplicate key
      json j = json::parse(valid);
      std::string body = j.dump();
      body.insert(1, "\"" + keys[rng() % keys.size()] + "\": " + values[rng() % values.size()] + ", ");
      return body;
    }
    case 4: {  // an unknown key
      json j = json::parse(valid);
      j["x_" + std::to_string(rng() % 1000)] = 1;
      return j.dump();
    }
    case 5: {  // random bytes
      std::string b(1 + rng() % 200, ' ');
      for (char& ch : b) ch = static_cast<char>(rng() % 256);
      b[0] = static_cast<char>('!' + rng() % 20);  // at best a JSON string or number: never an object
      return b;
    }
    case 6: return std::string(1 + rng() % 50, '[') + std::string(1 + rng() % 50, ']');  // nesting, not an object
    default: {  // a message with a wrong field
      json j = json::parse(valid);
      j["messages"][0][(rng() % 2) ? "role" : "content"] = json::object();
      return j.dump();
    }
  }
}

TEST(ServeFaults, AThousandMalformedBodiesGet4xxAndTheServerKeepsServing) {
  ServerProcess server(test_server_flags(4, {"--max-body-bytes", "65536"}));
  std::atomic<int> not_4xx{0}, no_answer{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      httplib::Client c = server.client(10);
      for (int i = t; i < 1000; i += 4) {
        const std::string body = i % 100 == 99 ? std::string(70000, 'x') : mutated_body(rng, i);  // some too large
        auto res = c.Post(i % 3 ? "/v1/chat/completions" : "/v1/completions", body, "application/json");
        if (!res) ++no_answer;
        else if (res->status < 400 || res->status > 499) {
          ++not_4xx;
          ADD_FAILURE() << res->status << " for " << body.substr(0, 120);
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(not_4xx.load(), 0);
  EXPECT_EQ(no_answer.load(), 0);
  httplib::Client c = server.client();
  int status = 0;
  const std::optional<json> ok = post(c, "/v1/chat/completions", chat("still there?", 4).dump(), &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ((*ok)["object"], "chat.completion");
}

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  return fd;
}

// Sends `request` on a fresh connection and returns what comes back until the server closes it or
// `patience` passes without a byte.
std::string exchange(int port, const std::string& request, std::chrono::seconds patience) {
  const int fd = connect_to(port);
  if (fd < 0) return "";
  timeval tv{static_cast<time_t>(patience.count()), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof buffer, 0)) > 0;) response.append(buffer, static_cast<size_t>(n));
  close(fd);
  return response;
}

int status_of(const std::string& response) {
  return response.size() > 12 ? std::atoi(response.c_str() + 9) : 0;  // "HTTP/1.1 200 ..."
}

std::string chunked_post(const std::string& path, const std::string& body, size_t chunk) {
  std::string request = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n" +
                        "Transfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += chunk) {
    const std::string piece = body.substr(at, chunk);
    char size[32];
    snprintf(size, sizeof size, "%zx\r\n", piece.size());
    request += size + piece + "\r\n";
  }
  return request + "0\r\n\r\n";
}

// What httplib 0.11 gets wrong on its own: a POST with neither Content-Length nor a chunked body (it
// would read until the client closes, holding a connection thread for the whole --timeout), a
// chunked body past --max-body-bytes (it would read it whole, however long) and a form-encoded one
// over 8 KiB (refused there whatever the limit).
TEST(ServeFaults, BodiesAreHeldToTheLimitHoweverTheyArrive) {
  ServerProcess server(test_server_flags(2, {"--max-body-bytes", "16384", "--timeout", "60"}));
  const std::string no_body = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n";
  EXPECT_EQ(status_of(exchange(server.port(), no_body, std::chrono::seconds(10))), 400);  // not after 60 s
  const std::string small = chat("hi", 2).dump();
  EXPECT_EQ(status_of(exchange(server.port(), chunked_post("/v1/chat/completions", small, 7),
                               std::chrono::seconds(30))), 200);
  json big = chat("hi", 2);
  big["user"] = std::string(20000, 'a');
  const std::string refused = exchange(server.port(), chunked_post("/v1/chat/completions", big.dump(), 1000),
                                       std::chrono::seconds(30));
  EXPECT_EQ(status_of(refused), 413) << refused.substr(0, 200);
  EXPECT_NE(refused.find("request_too_large"), std::string::npos);
  json form = chat("hi", 2);
  form["user"] = std::string(10000, 'a');  // 10 KB: past httplib's 8 KiB for forms, within the limit
  httplib::Client c = server.client();
  auto res = c.Post("/v1/chat/completions", form.dump(), "application/x-www-form-urlencoded");
  EXPECT_EQ(res->status, 200) << res->body;
}

TEST(ServeFaults, ASlowClientIsTimedOutWithoutBlockingOthers) {
  ServerProcess server(test_server_flags(4, {"--timeout", "1"}));
  const int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Content-Length: 10\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
  std::atomic<bool> cut_off{false};
  std::thread slow([&] {
    for (char ch : head) {  // one byte every 50 ms: 7 s for the head, far past the 1 s deadline
      if (send(fd, &ch, 1, MSG_NOSIGNAL) != 1) {
        cut_off = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // Meanwhile others are served.
  httplib::Client c = server.client();
  for (int i = 0; i < 5; ++i) {
    int status = 0;
    post(c, "/v1/chat/completions", chat("quick " + std::to_string(i), 4).dump(), &status);
    EXPECT_EQ(status, 200);
  }
  slow.join();
  // The server closed the slow connection: a write failed, or reading finds it closed.
  char buffer[512];
  const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
  EXPECT_TRUE(cut_off || n <= 0 || std::string(buffer, static_cast<size_t>(n)).find(" 408 ") != std::string::npos)
      << "the slow client was not cut off";
  close(fd);
}

TEST(ServeFaults, SigtermMidLoadDrainsAndExitsZero) {
  auto server = std::make_unique<ServerProcess>(test_server_flags(8, {"--timeout", "2"}));
  std::atomic<int> ended{0}, done{0}, errored{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      httplib::Client c = server->client(30);
      json body = chat("Story " + std::to_string(i), i % 2 ? 16 : 450, true);  // some short, some too long to finish
      body["ignore_eos"] = true;
      const StreamResult r = stream_request(c, "/v1/chat/completions", body);
      ++ended;
      if (r.done) ++done;
      if (!r.events.empty() && r.events.back().contains("error")) ++errored;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = Clock::now();
  const std::optional<int> status = server->stop(std::chrono::seconds(20));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& t : threads) t.join();
  EXPECT_EQ(status, 0);
  EXPECT_LT(seconds, 10.0) << "the drain took longer than --timeout allows";
  EXPECT_EQ(ended.load(), 8);            // every stream ended, none hung
  EXPECT_EQ(done + errored, 8);          // each finished with [DONE] or an error event
  EXPECT_GE(done.load(), 4);             // the short ones finished
}

}  // namespace
}  // namespace dspark::test
