// Load on a real `dspark serve` with speculation on: 64 concurrent streaming clients, several
// hundred requests. Every request completes; at T = 0 each output equals the same prompt's output
// served alone; at T > 0 the stream of a seeded request equals its non-streamed twin; the token
// counts match (nothing lost or duplicated); the running gauge returns to 0.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "serve/server_process.h"

namespace dspark::test {
namespace {

using nlohmann::json;

constexpr int kClients = 64;
constexpr int kRequests = 320;
constexpr int kMaxTokens = 48;

const std::vector<std::string> kTopics = {"the sea",   "a red fox",   "winter",    "a small robot", "bread",
                                          "the moon",  "an old map",  "rain",      "a garden",      "music",
                                          "a bicycle", "the mountains", "a letter", "friendship",   "a lighthouse",
                                          "coffee"};

json chat_body(const std::string& topic, bool stream, double temperature = 0.0, int64_t seed = 0) {
  json body = {{"model", "tiny-target-8l"},
               {"messages", {{{"role", "user"}, {"content", "Write a few sentences about " + topic + "."}}}},
               {"max_tokens", kMaxTokens},
               {"temperature", temperature},
               {"seed", seed}};
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

struct Reference {
  std::string text;
  int64_t completion_tokens = 0;
};

TEST(ServeLoad, SixtyFourStreamingClientsGetTheSingleRequestOutputs) {
  ServerProcess server(test_server_flags(kClients, {"--max-queue", "512"}));

  // The outputs of each prompt served alone (one request in flight), non-streamed.
  std::map<std::string, Reference> reference;
  httplib::Client alone = server.client();
  for (const std::string& topic : kTopics) {
    auto res = alone.Post("/v1/chat/completions", chat_body(topic, false).dump(), "application/json");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response");
    const json j = json::parse(res->body);
    reference[topic] = {j["choices"][0]["message"]["content"], j["usage"]["completion_tokens"]};
    ASSERT_GT(reference[topic].completion_tokens, 0);
  }

  std::atomic<int> next{0}, completed{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(failures_mutex);
    failures.push_back(what);
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&] {
      httplib::Client client = server.client();
      for (int i; (i = next++) < kRequests;) {
        const std::string& topic = kTopics[static_cast<size_t>(i) % kTopics.size()];
        const StreamResult r = stream_request(client, "/v1/chat/completions", chat_body(topic, true));
        if (r.status != 200 || !r.done || r.events.size() < 3) {
          fail("request " + std::to_string(i) + ": status " + std::to_string(r.status) + ", done " + std::to_string(r.done));
          continue;
        }
        const json& usage = r.events.back()["usage"];
        const json& finish = r.events[r.events.size() - 2];
        if (r.text != reference[topic].text) fail("request " + std::to_string(i) + " (" + topic + "): '" + r.text + "'");
        if (usage["completion_tokens"] != reference[topic].completion_tokens)
          fail("request " + std::to_string(i) + ": " + usage.dump());
        if (!finish.contains("timings") || !finish["metrics"].contains("speculative_decoding"))
          fail("request " + std::to_string(i) + ": no statistics on the last chunk");
        ++completed;
      }
    });
  for (auto& t : clients) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(completed.load(), kRequests);

  // Speculation was on: drafts were verified and accepted.
  EXPECT_GT(server.metric("vllm:spec_decode_num_accepted_tokens_total").value_or(0), 0);
  // Every request left the engine: the gauge returns to 0 (it is published after each step).
  double running = -1;
  for (int i = 0; i < 50 && running != 0; ++i) {
    running = server.metric("vllm:num_requests_running").value_or(-1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(running, 0);
  EXPECT_EQ(server.metric("vllm:request_success_total{model_name=\"tiny-target-8l\",finished_reason=\"abort\"}"), 0);
}

TEST(ServeLoad, AStreamEqualsTheNonStreamedResponseForTheSameSeed) {
  ServerProcess server(test_server_flags(8));
  constexpr int kPairs = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> streamed(kPairs), whole(kPairs);
  for (int i = 0; i < kPairs; ++i)
    threads.emplace_back([&, i] {
      httplib::Client client = server.client();
      const std::string& topic = kTopics[static_cast<size_t>(i)];
      streamed[i] = stream_request(client, "/v1/chat/completions", chat_body(topic, true, 0.9, 1000 + i)).text;
      auto res = client.Post("/v1/chat/completions", chat_body(topic, false, 0.9, 1000 + i).dump(), "application/json");
      whole[i] = res && res->status == 200 ? json::parse(res->body)["choices"][0]["message"]["content"].get<std::string>()
                                           : "<failed>";
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kPairs; ++i) {
    EXPECT_FALSE(streamed[i].empty());
    EXPECT_EQ(streamed[i], whole[i]) << "seed " << 1000 + i;
  }
}

}  // namespace
}  // namespace dspark::test
