// The OpenAI wire format: what parse_completion_request accepts and refuses, and the exact shapes
// of responses and chunks.
#include <gtest/gtest.h>

#include "serve/openai_protocol.h"

namespace dspark::serve {
namespace {

using nlohmann::json;

CompletionRequest chat(const json& body) { return parse_completion_request(body.dump(), Endpoint::kChat); }
CompletionRequest completion(const json& body) { return parse_completion_request(body.dump(), Endpoint::kCompletions); }

// The ApiError a body raises: status and param.
std::pair<int, std::string> refusal(const std::string& body, Endpoint endpoint = Endpoint::kChat) {
  try {
    parse_completion_request(body, endpoint);
  } catch (const ApiError& e) {
    return {e.status(), e.param()};
  }
  return {0, ""};
}

const json kHello = json::array({{{"role", "user"}, {"content", "hi"}}});

TEST(OpenAiProtocol, ParsesAChatRequestWithEveryParameter) {
  const CompletionRequest r = chat({{"model", "m"},
                                    {"messages", kHello},
                                    {"n", 2},
                                    {"stop", "\n\n"},
                                    {"max_completion_tokens", 32},
                                    {"temperature", 0.7},
                                    {"top_p", 0.9},
                                    {"top_k", 20},
                                    {"min_p", 0.05},
                                    {"seed", 42},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}},
                                    {"ignore_eos", true},
                                    {"stop_token_ids", {5, 6}},
                                    {"chat_template_kwargs", {{"enable_thinking", true}}},
                                    {"speculative", false},
                                    {"frequency_penalty", 0},
                                    {"user", "someone"}});
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(r.max_tokens, 32);
  EXPECT_DOUBLE_EQ(*r.temperature, 0.7);
  EXPECT_DOUBLE_EQ(*r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 20);
  EXPECT_DOUBLE_EQ(*r.min_p, 0.05);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_TRUE(r.stream && r.include_usage && r.ignore_eos && r.enable_thinking);
  EXPECT_FALSE(r.speculative);
  EXPECT_EQ(r.stop_token_ids, (std::vector<int64_t>{5, 6}));
}

TEST(OpenAiProtocol, MaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(chat({{"messages", kHello}, {"max_tokens", 10}, {"max_completion_tokens", 20}}).max_tokens, 20);
  EXPECT_EQ(chat({{"messages", kHello}, {"max_tokens", 10}}).max_tokens, 10);
  EXPECT_FALSE(chat({{"messages", kHello}}).max_tokens.has_value());
}

TEST(OpenAiProtocol, ContentPartsAndDeveloperRole) {
  const CompletionRequest r = chat({{"messages", json::array({{{"role", "developer"}, {"content", "be brief"}},
                                                              {{"role", "user"},
                                                               {"content", json::array({{{"type", "text"}, {"text", "a"}},
                                                                                        {{"type", "text"}, {"text", "b"}}})}}})}});
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
}

TEST(OpenAiProtocol, CompletionPromptAsTextOrIds) {
  EXPECT_EQ(*completion({{"prompt", "once upon"}}).prompt_text, "once upon");
  EXPECT_EQ(*completion({{"prompt", {"once upon"}}}).prompt_text, "once upon");
  EXPECT_EQ(completion({{"prompt", {1, 2, 3}}}).prompt_ids, (std::vector<int64_t>{1, 2, 3}));
}

TEST(OpenAiProtocol, RefusesMalformedBodiesWith400NamingTheParameter) {
  const std::string hello = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", ""},
      {"[1, 2]", ""},
      {"\"text\"", ""},
      {"{}", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {"{" + hello + R"(, "temperature": -1})", "temperature"},
      {"{" + hello + R"(, "temperature": "hot"})", "temperature"},
      {"{" + hello + R"(, "temperature": 1e400})", ""},  // not even JSON: the number overflows
      {"{" + hello + R"(, "max_tokens": 0})", "max_tokens"},
      {"{" + hello + R"(, "max_tokens": 1.5})", "max_tokens"},
      {"{" + hello + R"(, "max_tokens": 99999999999999999999})", "max_tokens"},
      {"{" + hello + R"(, "n": 0})", "n"},
      {"{" + hello + R"(, "top_p": 0})", "top_p"},
      {"{" + hello + R"(, "top_k": -2})", "top_k"},
      {"{" + hello + R"(, "seed": -2})", "seed"},
      {"{" + hello + R"(, "best_of": 2})", "best_of"},
      {"{" + hello + R"(, "suffix": "x"})", "suffix"},
      {"{" + hello + R"(, "stop": ["a", "b", "c", "d", "e"]})", "stop"},
      {"{" + hello + R"(, "stop": [""]})", "stop"},
      {"{" + hello + R"(, "stop": 7})", "stop"},
      {"{" + hello + R"(, "stream": "yes"})", "stream"},
      {"{" + hello + R"(, "stream_options": {"include_usage": true}})", "stream_options"},
      {"{" + hello + R"(, "stream": true, "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
      {"{" + hello + R"(, "stop_token_ids": [-1]})", "stop_token_ids"},
      {"{" + hello + R"(, "bogus": 1})", "bogus"},
      {"{" + hello + R"(, "frequency_penalty": 0.5})", "frequency_penalty"},
      {"{" + hello + R"(, "logprobs": true})", "logprobs"},
      {"{" + hello + R"(, "chat_template_kwargs": {"other": 1}})", "chat_template_kwargs.other"},
      {"{" + hello + R"(, "model": 3})", "model"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}", ""},  // invalid UTF-8
  };
  for (const auto& [body, param] : cases) {
    const auto [status, got_param] = refusal(body);
    EXPECT_EQ(status, 400) << body;
    EXPECT_EQ(got_param, param) << body;
  }
  EXPECT_EQ(refusal(R"({"prompt": ""})", Endpoint::kCompletions).first, 400);
  EXPECT_EQ(refusal(R"({"prompt": []})", Endpoint::kCompletions).first, 400);
  EXPECT_EQ(refusal(R"({"prompt": [1, "a"]})", Endpoint::kCompletions).first, 400);
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": "x"}]})", Endpoint::kCompletions).second, "prompt");
}

// What vLLM's and llama.cpp's parsers take and ours refused: integers written as whole floats,
// llama.cpp's seed -1 ("a fresh seed", as if none were given), and the legacy completions
// parameters at their neutral values. Range messages print bounds as written (they printed
// [0.000000, 1.000000] for top_p, which refuses 0).
TEST(OpenAiProtocol, AcceptsWhatOtherServersAcceptAndStatesRangesAsWritten) {
  const CompletionRequest r = completion({{"prompt", "hi"}, {"max_tokens", 5.0}, {"n", 2.0}, {"seed", -1},
                                          {"suffix", nullptr}, {"best_of", 1}, {"min_tokens", 0.0}});
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.n, 2);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_EQ(completion({{"prompt", "hi"}, {"seed", 7.0}}).seed, 7u);
  auto message = [](const json& extra) {
    json body = {{"messages", kHello}};
    body.update(extra);
    try {
      chat(body);
    } catch (const ApiError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message({{"top_p", 1.5}}), "'top_p' must be in (0, 1]");
  EXPECT_EQ(message({{"top_p", -0.5}}), "'top_p' must be in (0, 1]");
  EXPECT_EQ(message({{"temperature", 3}}), "'temperature' must be in [0, 2]");
  EXPECT_EQ(message({{"max_tokens", 2.5}}), "'max_tokens' must be an integer");
}

TEST(OpenAiProtocol, ErrorEnvelope) {
  const json e = error_json(ApiError(400, "bad thing", "temperature"));
  EXPECT_EQ(e, json({{"error", {{"message", "bad thing"}, {"type", "invalid_request_error"}, {"param", "temperature"}, {"code", 400}}}}));
  EXPECT_EQ(error_json(ApiError(401, "no"))["error"]["type"], "authentication_error");
  EXPECT_TRUE(error_json(ApiError(503, "busy"))["error"]["param"].is_null());
}

engine::RequestStats speculative_stats() {
  engine::RequestStats s;
  s.prompt_tokens = 10;
  s.generated_tokens = 9;
  s.queued_seconds = 0.5;
  s.first_token_seconds = 1.0;
  s.seconds = 3.0;
  s.record_step(3, 2, 3);  // 3 drafts verified, 2 accepted
  s.record_step(3, 3, 4);
  s.record_step(0, 0, 1);  // a step without drafts
  return s;
}

TEST(OpenAiProtocol, TimingsAndSpeculativeMetrics) {
  const engine::RequestStats s = speculative_stats();
  const json t = timings_json(s);
  EXPECT_EQ(t["prompt_n"], 10);
  EXPECT_DOUBLE_EQ(t["prompt_ms"].get<double>(), 500.0);  // first token - queue
  EXPECT_DOUBLE_EQ(t["prompt_per_second"].get<double>(), 20.0);
  EXPECT_EQ(t["predicted_n"], 9);
  EXPECT_DOUBLE_EQ(t["predicted_ms"].get<double>(), 2000.0);
  EXPECT_EQ(t["draft_n"], 6);
  EXPECT_EQ(t["draft_n_accepted"], 5);
  const json m = metrics_json(s)["speculative_decoding"];
  EXPECT_EQ(m["num_drafts"], 2);
  EXPECT_EQ(m["num_draft_tokens"], 6);
  EXPECT_EQ(m["num_accepted_draft_tokens"], 5);
  EXPECT_EQ(m["num_spec_steps"], 3);
  EXPECT_DOUBLE_EQ(m["mean_acceptance_length"].get<double>(), 1.0 + 5.0 / 2.0);
  EXPECT_DOUBLE_EQ(m["draft_acceptance_rate"].get<double>(), 5.0 / 6.0);
  EXPECT_EQ(m["acceptance_per_position"], json({1.0, 1.0, 0.5}));
  EXPECT_FALSE(timings_json(engine::RequestStats{}).contains("draft_n"));  // no drafting, no draft fields
}

TEST(OpenAiProtocol, ChatResponseAndChunkShapes) {
  const ResponseHead head{.endpoint = Endpoint::kChat, .id = "chatcmpl-1", .created = 100, .model = "m"};
  const ChoiceOutcome choice{.index = 0, .text = "hello", .finish_reason = "stop", .stats = speculative_stats()};
  const json r = completion_response(head, {choice}, 10);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["id"], "chatcmpl-1");
  EXPECT_EQ(r["choices"][0]["message"], json({{"role", "assistant"}, {"content", "hello"}}));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["usage"], json({{"prompt_tokens", 10}, {"completion_tokens", 9}, {"total_tokens", 19}}));
  EXPECT_TRUE(r.contains("timings") && r.contains("metrics"));

  const json first = delta_chunk(head, 0, "", true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(delta_chunk(head, 1, "x", false)["choices"][0]["delta"], json({{"content", "x"}}));
  EXPECT_EQ(delta_chunk(head, 1, "x", false)["choices"][0]["index"], 1);
  const json last = finish_chunk(head, choice);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(last["timings"]["draft_n"], 6);
  EXPECT_EQ(last["metrics"]["speculative_decoding"]["num_drafts"], 2);
  const json usage = usage_chunk(head, 10, 9);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 19);
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(OpenAiProtocol, DeltaEventsEqualTheChunkBuiltInFull) {
  for (const Endpoint endpoint : {Endpoint::kChat, Endpoint::kCompletions}) {
    const ResponseHead head{.endpoint = endpoint, .id = "x-7", .created = 5, .model = "m\"q"};
    const DeltaEvents events(head, 2);
    for (const std::string text : {"", "plain", "quote \" backslash \\ newline \n tab \t", "ünï 日本 🎉", "\x01ctl",
                                   "bad \xff utf8"})
      EXPECT_EQ(events.event(text), sse_event(delta_chunk(head, 2, text, false))) << text;
  }
}

TEST(OpenAiProtocol, CompletionShapes) {
  const ResponseHead head{.endpoint = Endpoint::kCompletions, .id = "cmpl-1", .created = 100, .model = "m"};
  const json r = completion_response(head, {{.index = 0, .text = "abc", .finish_reason = "length"}}, 3);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "abc");
  EXPECT_FALSE(r["choices"][0].contains("message"));
  const json chunk = delta_chunk(head, 0, "de", false);
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "de");
}

}  // namespace
}  // namespace dspark::serve
