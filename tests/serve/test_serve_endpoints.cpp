// The other endpoints of a real `dspark serve`: /health, /v1/models, /tokenize and /detokenize,
// /metrics and /stats, the dashboard page, n > 1, stop strings, and speculation turned off per request.
#include <gtest/gtest.h>

#include "serve/server_process.h"

namespace dspark::test {
namespace {

using nlohmann::json;

json get_json(httplib::Client& c, const std::string& path) {
  auto res = c.Get(path);
  EXPECT_TRUE(res && res->status == 200) << path;
  return res ? json::parse(res->body) : json();
}

json post_json(httplib::Client& c, const std::string& path, const json& body) {
  auto res = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(res && res->status == 200) << path << ": " << (res ? res->body : "no response");
  return res ? json::parse(res->body) : json();
}

class ServeEndpoints : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(test_server_flags(4)); }
  static void TearDownTestSuite() { delete server_; }
  static ServerProcess* server_;
};
ServerProcess* ServeEndpoints::server_ = nullptr;

TEST_F(ServeEndpoints, HealthModelsAndTokenizer) {
  httplib::Client c = server_->client();
  EXPECT_EQ(get_json(c, "/health"), json({{"status", "ok"}}));
  const json models = get_json(c, "/v1/models");
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "tiny-target-8l");
  EXPECT_EQ(models["data"][0]["meta"]["drafter"], "tiny-target-8l-dspark");
  EXPECT_EQ(models["data"][0]["meta"]["schedule"], "fixed");
  EXPECT_EQ(models["data"][0]["max_model_len"], 512);
  const json tokens = post_json(c, "/tokenize", {{"content", "Hello world"}})["tokens"];
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(post_json(c, "/detokenize", {{"tokens", tokens}})["content"], "Hello world");
  auto bad = c.Post("/detokenize", R"({"tokens": [99999999]})", "application/json");
  EXPECT_EQ(bad->status, 400);
  // OpenAI's retrieve: the served model, and a 404 for another.
  const json model = get_json(c, "/v1/models/tiny-target-8l");
  EXPECT_EQ(model["object"], "model");
  EXPECT_EQ(model["id"], "tiny-target-8l");
  auto other = c.Get("/v1/models/gpt-4o");
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(json::parse(other->body)["error"]["type"], "not_found_error");
  // with_pieces: a piece of a multi-byte character comes as its byte values (as llama.cpp's
  // server sends it), so the pieces hold the text's bytes exactly; as JSON text each was U+FFFD.
  const std::string text = "\xc3\xa9\xf0\x9f\x98\x80 ok";  // "é😀 ok"
  std::string joined;
  int byte_pieces = 0;
  const json pieces = post_json(c, "/tokenize", {{"content", text}, {"with_pieces", true}});
  for (const json& t : pieces["tokens"]) {
    if (t["piece"].is_string()) {
      joined += t["piece"].get<std::string>();
      continue;
    }
    ++byte_pieces;
    for (const json& b : t["piece"]) joined += static_cast<char>(b.get<int>());
  }
  EXPECT_EQ(joined, text);
  EXPECT_GT(byte_pieces, 0);
}

TEST_F(ServeEndpoints, SeveralChoicesStopStringsAndSpeculationOff) {
  httplib::Client c = server_->client();
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 1.0}, {"seed", 5}, {"n", 3}};
  const json r = post_json(c, "/v1/completions", body);
  ASSERT_EQ(r["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r["choices"][i]["index"], i);
  // Choice i is the request with seed 5 + i.
  body["n"] = 1;
  body["seed"] = 6;
  EXPECT_EQ(post_json(c, "/v1/completions", body)["choices"][0]["text"], r["choices"][1]["text"]);

  // Speculation off gives the same greedy text, and no drafts.
  json greedy = {{"prompt", "The weather today"}, {"max_tokens", 24}, {"temperature", 0}};
  const json on = post_json(c, "/v1/completions", greedy);
  greedy["speculative"] = false;
  const json off = post_json(c, "/v1/completions", greedy);
  EXPECT_EQ(on["choices"][0]["text"], off["choices"][0]["text"]);
  EXPECT_EQ(off["metrics"]["speculative_decoding"]["num_draft_tokens"], 0);
  EXPECT_FALSE(off["timings"].contains("draft_n"));

  // A stop string cuts the text before it, with finish_reason "stop".
  const std::string text = on["choices"][0]["text"];
  ASSERT_GE(text.size(), 6u);
  const std::string stop = text.substr(text.size() / 2, 3);
  greedy["stop"] = stop;
  const json cut = post_json(c, "/v1/completions", greedy);
  EXPECT_EQ(cut["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServeEndpoints, MetricsStatsAndDashboard) {
  httplib::Client c = server_->client();
  post_json(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 8}});
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  for (const char* name : {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                           "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
                           "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
                           "vllm:request_time_per_output_token_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket",
                           "vllm:request_queue_time_seconds_bucket", "vllm:spec_decode_num_drafts_total",
                           "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total",
                           "vllm:spec_decode_num_accepted_tokens_per_pos_total", "dspark:verification_budget_per_step",
                           "dspark:draft_time_share", "dspark:sps_estimate", "dspark:capacity_k",
                           "dspark:draft_cost_scale", "dspark:verify_cost_scale"})
    EXPECT_NE(metrics->body.find(std::string("\n") + name), std::string::npos) << name;
  EXPECT_GE(server_->metric("vllm:generation_tokens_total").value_or(0), 1);
  const json stats = get_json(c, "/stats");
  EXPECT_EQ(stats["model"], "tiny-target-8l");
  EXPECT_GE(stats["totals"]["requests"].get<int64_t>(), 1);
  EXPECT_FALSE(stats["recent"].empty());
  auto page = c.Get("/");
  ASSERT_TRUE(page && page->status == 200);
  EXPECT_NE(page->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(page->body.find("/stats"), std::string::npos);  // the page polls the stats endpoint
}

}  // namespace
}  // namespace dspark::test
