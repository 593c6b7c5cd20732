// A real `dspark serve` for the tests: started on a free loopback port, waited on until /health
// says 200, stopped with SIGTERM (then SIGKILL if it hangs) when the object dies.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "bench/http_stream.h"

namespace dspark::test {

class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> flags) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      // The suite runs two test processes on the CPUs at once. Workers that spin between parallel
      // regions (libgomp's default when a process has the CPUs to itself) lose whole time slices
      // to the other process, and these tests time the server's protocol, not its speed.
      setenv("OMP_WAIT_POLICY", "passive", 0);
      std::vector<std::string> args = {DSPARK_BINARY, "--threads", "2", "serve", "--port", "0"};
      args.insert(args.end(), flags.begin(), flags.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    stdout_ = fdopen(out[0], "r");
    char line[256] = "";
    if (!fgets(line, sizeof line, stdout_)) throw std::runtime_error("dspark serve printed nothing");
    const std::string text = line;
    port_ = std::stoi(text.substr(text.rfind(':') + 1));
    wait_healthy();
  }
  ~ServerProcess() {
    if (pid_ > 0 && !exit_status_) stop(std::chrono::seconds(30));
    if (stdout_) fclose(stdout_);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  httplib::Client client(int timeout_seconds = 120) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(timeout_seconds, 0);
    c.set_write_timeout(timeout_seconds, 0);
    return c;
  }

  // SIGTERM, then waits up to `patience` for the exit (SIGKILL after it). The exit status, or
  // nullopt when it had to be killed.
  std::optional<int> stop(std::chrono::milliseconds patience) {
    kill(pid_, SIGTERM);
    const auto end = std::chrono::steady_clock::now() + patience;
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    exit_status_ = -1;
    return std::nullopt;
  }

  // A Prometheus sample's value from /metrics (the first line whose name and labels start with
  // `series`), or nullopt.
  std::optional<double> metric(const std::string& series) const {
    auto res = client().Get("/metrics");
    if (!res) return std::nullopt;
    size_t at = 0;
    while ((at = res->body.find(series, at)) != std::string::npos) {
      if (at == 0 || res->body[at - 1] == '\n') {
        const size_t space = res->body.find(' ', at);
        return std::stod(res->body.substr(space + 1));
      }
      at += series.size();
    }
    return std::nullopt;
  }

 private:
  void wait_healthy() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(5);  // a first start profiles
    while (std::chrono::steady_clock::now() < end) {
      if (auto res = client(5).Get("/health"); res && res->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("dspark serve did not become healthy");
  }

  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  int port_ = 0;
  std::optional<int> exit_status_;
};

// Flags of the servers the tests start: the shipped tiny model (named: the default target is 8x
// larger, and these servers answer many requests) and its dspark drafter (found beside it),
// `fixed` verification (every schedule is lossless; this one needs no step-cost profile, which a
// fresh machine would spend a minute measuring), a short context to keep the KV cache small.
inline std::vector<std::string> test_server_flags(int max_concurrency, std::vector<std::string> more = {}) {
  std::vector<std::string> flags = {"--model", std::string(DSPARK_SOURCE_DIR) + "/models/tiny-target-8l",
                                    "--schedule", "fixed", "--max-context", "512", "--max-concurrency",
                                    std::to_string(max_concurrency)};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

// One streamed request's result: the events' payloads, parsed; `done` when [DONE] came.
struct StreamResult {
  int status = 0;
  std::vector<nlohmann::json> events;
  bool done = false;
  std::string text;  // the content deltas, joined
};

// POSTs `body` (with "stream": true) and reads the SSE stream. `stop_after` > 0: the client
// hangs up after that many events.
inline StreamResult stream_request(httplib::Client& client, const std::string& path, const nlohmann::json& body,
                                   size_t stop_after = 0) {
  StreamResult r;
  bench::SseParser sse;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  req.response_handler = [&](const httplib::Response& res) {
    r.status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    for (const std::string& payload : sse.feed(std::string_view(data, n))) {
      if (payload == "[DONE]") {
        r.done = true;
        continue;
      }
      nlohmann::json j = nlohmann::json::parse(payload);
      if (j.contains("choices") && !j["choices"].empty()) {
        const nlohmann::json& c = j["choices"][0];
        if (c.contains("delta") && c["delta"].contains("content")) r.text += c["delta"]["content"].get<std::string>();
        if (c.contains("text")) r.text += c["text"].get<std::string>();
      }
      r.events.push_back(std::move(j));
      if (stop_after > 0 && r.events.size() >= stop_after) return false;
    }
    return true;
  };
  client.send(req);
  return r;
}

}  // namespace dspark::test
