#include "serve/openai_protocol.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>

namespace dspark::serve {

namespace {

using nlohmann::json;

std::string default_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 503: return "unavailable_error";
    default: return status < 500 ? "invalid_request_error" : "server_error";
  }
}

[[noreturn]] void bad(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

// "0.5", "2", "1e-05": a bound as people write it (std::to_string wrote 0.000000).
std::string bound_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// A JSON integer, or a number with no fraction written as a float (5.0), as vLLM's and
// llama.cpp's parsers take it; one with a fraction, or beyond int64, is not an integer here.
int64_t integer(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  const bool whole_float = v.is_number_float() && std::isfinite(v.get<double>()) &&
                           v.get<double>() == std::trunc(v.get<double>()) && std::fabs(v.get<double>()) < 0x1p62;
  if (!v.is_number_integer() && !whole_float) bad(name, "'" + name + "' must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    bad(name, "'" + name + "' must be at most " + std::to_string(hi));
  const int64_t x = whole_float ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>();
  if (x < lo || x > hi)
    bad(name, "'" + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(x));
  return x;
}

double number(const json& v, const std::string& name, double lo, double hi) {
  if (!v.is_number()) bad(name, "'" + name + "' must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(name, "'" + name + "' must be in [" + bound_text(lo) + ", " + bound_text(hi) + "]");
  return x;
}

bool boolean(const json& v, const std::string& name) {
  if (!v.is_boolean()) bad(name, "'" + name + "' must be a boolean");
  return v.get<bool>();
}

std::string string(const json& v, const std::string& name) {
  if (!v.is_string()) bad(name, "'" + name + "' must be a string");
  return v.get<std::string>();
}

std::vector<int64_t> token_ids(const json& v, const std::string& name) {
  if (!v.is_array()) bad(name, "'" + name + "' must be an array of token ids");
  std::vector<int64_t> ids;
  for (const json& x : v) ids.push_back(integer(x, name, 0, std::numeric_limits<int32_t>::max()));
  return ids;
}

// The text of a message's content: a string, or OpenAI's array of {"type": "text", "text": ...} parts.
std::string message_content(const json& content, const std::string& name) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(name, "'" + name + "' must be a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") || !part["text"].is_string())
      bad(name, "'" + name + "' parts must be {\"type\": \"text\", \"text\": \"...\"}");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<tokenizer::ChatMessage> messages(const json& v) {
  if (!v.is_array()) bad("messages", "'messages' must be an array");
  if (v.empty()) bad("messages", "'messages' must not be empty");
  std::vector<tokenizer::ChatMessage> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string name = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) bad(name, "'" + name + "' must be an object");
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content" && key != "name") bad(name + "." + key, "unknown message field '" + key + "'");
    if (!m.contains("role")) bad(name + ".role", "'" + name + ".role' is required");
    const std::string role = string(m["role"], name + ".role");
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      bad(name + ".role", "'" + name + ".role' must be system, developer, user or assistant, got '" + role + "'");
    if (!m.contains("content")) bad(name + ".content", "'" + name + ".content' is required");
    out.push_back({role == "developer" ? "system" : role, message_content(m["content"], name + ".content")});
  }
  return out;
}

void prompt(const json& v, CompletionRequest& r) {
  if (v.is_string()) {
    if (v.get<std::string>().empty()) bad("prompt", "'prompt' must not be empty");
    r.prompt_text = v.get<std::string>();
    return;
  }
  if (v.is_array() && v.size() == 1 && v[0].is_string()) return prompt(v[0], r);
  if (v.is_array() && !v.empty() && v[0].is_number()) {
    r.prompt_ids = token_ids(v, "prompt");
    return;
  }
  bad("prompt", "'prompt' must be a non-empty string, a one-string array or an array of token ids");
}

std::vector<std::string> stop_strings(const json& v) {
  if (v.is_null()) return {};
  if (!v.is_string() && (!v.is_array() || v.size() > 4)) bad("stop", "'stop' must be a string or an array of up to 4 strings");
  std::vector<std::string> out;
  for (const json& s : v.is_string() ? json::array({v}) : v) {
    out.push_back(string(s, "stop"));
    if (out.back().empty()) bad("stop", "'stop' strings must not be empty");
  }
  return out;
}

void stream_options(const json& v, CompletionRequest& r) {
  if (v.is_null()) return;
  if (!v.is_object()) bad("stream_options", "'stream_options' must be an object");
  for (const auto& [key, value] : v.items()) {
    if (key == "include_usage") r.include_usage = boolean(value, "stream_options.include_usage");
    else if (key == "continuous_usage_stats") {
      if (boolean(value, "stream_options.continuous_usage_stats")) bad("stream_options.continuous_usage_stats", "'continuous_usage_stats' is not supported");
    } else bad("stream_options." + key, "unknown parameter 'stream_options." + key + "'");
  }
}

void template_kwargs(const json& v, CompletionRequest& r) {
  if (!v.is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  for (const auto& [key, value] : v.items()) {
    if (key != "enable_thinking") bad("chat_template_kwargs." + key, "unsupported chat template argument '" + key + "'");
    r.enable_thinking = boolean(value, "chat_template_kwargs.enable_thinking");
  }
}

// Known parameters we do not implement, each with the test of the values that mean "off" (null
// always does): they are accepted only at those.
using NeutralTest = bool (*)(const json&);

const std::map<std::string, NeutralTest>& unimplemented() {
  static const NeutralTest zero = [](const json& v) { return v.is_number() && v.get<double>() == 0.0; };
  static const NeutralTest one = [](const json& v) { return v.is_number() && v.get<double>() == 1.0; };
  static const NeutralTest is_false = [](const json& v) { return v.is_boolean() && !v.get<bool>(); };
  static const std::map<std::string, NeutralTest> table = {
      {"frequency_penalty", zero},
      {"presence_penalty", zero},
      {"repetition_penalty", one},
      {"logprobs", is_false},
      {"echo", is_false},
      {"parallel_tool_calls", is_false},
      {"logit_bias", [](const json& v) { return v.is_object() && v.empty(); }},
      {"min_tokens", [](const json& v) { return v.is_number() && v.get<double>() == 0.0; }},
      {"best_of", one},  // legacy completions: choices sampled per returned choice
      {"suffix", [](const json& v) { return v.is_string() && v.get<std::string>().empty(); }},  // legacy insertion
      {"skip_special_tokens", [](const json& v) { return v.is_boolean(); }},
      {"user", [](const json& v) { return v.is_string(); }},
      {"response_format", [](const json& v) { return v.is_object() && v.value("type", json()) == "text"; }},
  };
  return table;
}

using Setter = std::function<void(const json&, CompletionRequest&)>;

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"model", [](const json& v, CompletionRequest& r) { r.model = string(v, "model"); }},
      {"n", [](const json& v, CompletionRequest& r) { r.n = integer(v, "n", 1, 16); }},
      {"stop", [](const json& v, CompletionRequest& r) { r.stop = stop_strings(v); }},
      {"max_tokens", [](const json& v, CompletionRequest& r) {
         if (!v.is_null() && !r.max_tokens) r.max_tokens = integer(v, "max_tokens", 1, std::numeric_limits<int32_t>::max());
       }},
      {"max_completion_tokens", [](const json& v, CompletionRequest& r) {
         if (!v.is_null()) r.max_tokens = integer(v, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max());
       }},
      {"temperature", [](const json& v, CompletionRequest& r) { if (!v.is_null()) r.temperature = number(v, "temperature", 0, 2); }},
      {"top_p", [](const json& v, CompletionRequest& r) {
         if (v.is_null()) return;
         if (v.is_number() && !(v.get<double>() > 0 && v.get<double>() <= 1)) bad("top_p", "'top_p' must be in (0, 1]");
         r.top_p = number(v, "top_p", 0, 1);
       }},
      {"min_p", [](const json& v, CompletionRequest& r) { if (!v.is_null()) r.min_p = number(v, "min_p", 0, 1); }},
      {"top_k", [](const json& v, CompletionRequest& r) {
         if (v.is_null()) return;
         const int64_t k = integer(v, "top_k", -1, std::numeric_limits<int32_t>::max());
         r.top_k = k < 0 ? 0 : k;  // vLLM: -1 (or 0) means off
       }},
      {"seed", [](const json& v, CompletionRequest& r) {
         if (v.is_null()) return;
         // -1 is llama.cpp's "a fresh seed", as if none were given.
         const int64_t seed = integer(v, "seed", -1, std::numeric_limits<int64_t>::max());
         if (seed >= 0) r.seed = static_cast<uint64_t>(seed);
       }},
      {"stream", [](const json& v, CompletionRequest& r) { if (!v.is_null()) r.stream = boolean(v, "stream"); }},
      {"stream_options", stream_options},
      {"ignore_eos", [](const json& v, CompletionRequest& r) { r.ignore_eos = boolean(v, "ignore_eos"); }},
      {"stop_token_ids", [](const json& v, CompletionRequest& r) { if (!v.is_null()) r.stop_token_ids = token_ids(v, "stop_token_ids"); }},
      {"speculative", [](const json& v, CompletionRequest& r) { r.speculative = boolean(v, "speculative"); }},
  };
  return table;
}

}  // namespace

ApiError::ApiError(int status, const std::string& message, std::string param, std::string type)
    : std::runtime_error(message), status_(status), type_(type.empty() ? default_type(status) : std::move(type)),
      param_(std::move(param)) {}

nlohmann::json error_json(const ApiError& error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error.type()},
            {"param", error.param().empty() ? json() : json(error.param())},
            {"code", error.status()}}}};
}

nlohmann::json parse_json_object(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "the body must be a JSON object");
  return j;
}

CompletionRequest parse_completion_request(const std::string& body, Endpoint endpoint) {
  const json j = parse_json_object(body);
  CompletionRequest r;
  r.endpoint = endpoint;
  const char* input = endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (!j.contains(input)) bad(input, std::string("'") + input + "' is required");
  for (const auto& [key, value] : j.items()) {
    if (key == input) {
      endpoint == Endpoint::kChat ? void(r.messages = messages(value)) : prompt(value, r);
    } else if (endpoint == Endpoint::kChat && key == "chat_template_kwargs") {
      template_kwargs(value, r);
    } else if (auto it = setters().find(key); it != setters().end()) {
      it->second(value, r);
    } else if (auto neutral = unimplemented().find(key); neutral == unimplemented().end()) {
      bad(key, "unknown parameter '" + key + "'");
    } else if (!value.is_null() && !neutral->second(value)) {
      bad(key, "'" + key + "' is not supported (only its default value is accepted)");
    }
  }
  if (r.include_usage && !r.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
  return r;
}

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

nlohmann::json timings_json(const engine::RequestStats& s) {
  const double prompt_ms = 1e3 * (s.first_token_seconds - s.queued_seconds);
  const double predicted_ms = 1e3 * (s.seconds - s.first_token_seconds);
  json t = {{"prompt_n", s.prompt_tokens},
            {"prompt_ms", prompt_ms},
            {"prompt_per_second", prompt_ms > 0 ? 1e3 * static_cast<double>(s.prompt_tokens) / prompt_ms : 0.0},
            {"predicted_n", s.generated_tokens},
            {"predicted_ms", predicted_ms},
            {"predicted_per_second", s.decode_tokens_per_second()}};
  if (s.num_drafts > 0) {
    t["draft_n"] = s.num_draft_tokens;
    t["draft_n_accepted"] = s.num_accepted_tokens;
  }
  return t;
}

nlohmann::json metrics_json(const engine::RequestStats& s) {
  return {{"speculative_decoding",
           {{"mean_acceptance_length", s.mean_acceptance_length()},
            {"draft_acceptance_rate", s.acceptance_rate()},
            {"acceptance_per_position", s.accepted_per_draft()},
            {"num_spec_steps", s.num_steps},
            {"num_drafts", s.num_drafts},
            {"num_draft_tokens", s.num_draft_tokens},
            {"num_accepted_draft_tokens", s.num_accepted_tokens}}}};
}

namespace {

json head_json(const ResponseHead& head, bool chunk) {
  const bool chat = head.endpoint == Endpoint::kChat;
  return {{"id", head.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", head.created},
          {"model", head.model}};
}

}  // namespace

nlohmann::json completion_response(const ResponseHead& head, const std::vector<ChoiceOutcome>& choices,
                                   int64_t prompt_tokens) {
  json out = head_json(head, false);
  json list = json::array();
  engine::RequestStats pooled;
  int64_t completion_tokens = 0;
  for (const ChoiceOutcome& c : choices) {
    json choice = {{"index", c.index}, {"finish_reason", c.finish_reason}, {"logprobs", nullptr}};
    if (head.endpoint == Endpoint::kChat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      choice["text"] = c.text;
    list.push_back(std::move(choice));
    pooled.merge(c.stats);
    completion_tokens += c.stats.generated_tokens;
  }
  pooled.prompt_tokens = prompt_tokens;
  out["choices"] = std::move(list);
  out["usage"] = usage_json(prompt_tokens, completion_tokens);
  out["timings"] = timings_json(choices.size() == 1 ? choices[0].stats : pooled);
  out["metrics"] = metrics_json(pooled);
  return out;
}

nlohmann::json delta_chunk(const ResponseHead& head, int64_t index, const std::string& text, bool first) {
  json out = head_json(head, true);
  json choice = {{"index", index}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
  if (head.endpoint == Endpoint::kChat) {
    choice["delta"] = first ? json{{"role", "assistant"}, {"content", text}} : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  out["choices"] = json::array({std::move(choice)});
  if (head.endpoint == Endpoint::kChat) out["usage"] = nullptr;
  return out;
}

nlohmann::json finish_chunk(const ResponseHead& head, const ChoiceOutcome& c) {
  json out = head_json(head, true);
  json choice = {{"index", c.index}, {"finish_reason", c.finish_reason}, {"logprobs", nullptr}};
  if (head.endpoint == Endpoint::kChat)
    choice["delta"] = json::object();
  else
    choice["text"] = "";
  out["choices"] = json::array({std::move(choice)});
  if (head.endpoint == Endpoint::kChat) out["usage"] = nullptr;
  out["timings"] = timings_json(c.stats);
  out["metrics"] = metrics_json(c.stats);
  return out;
}

nlohmann::json usage_chunk(const ResponseHead& head, int64_t prompt_tokens, int64_t completion_tokens) {
  json out = head_json(head, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(prompt_tokens, completion_tokens);
  return out;
}

DeltaEvents::DeltaEvents(const ResponseHead& head, int64_t index) {
  const std::string marker = "\x01dspark-delta\x01";  // dumped as "\u0001dspark-delta\u0001"
  const std::string quoted = json(marker).dump();
  const std::string whole = sse_event(delta_chunk(head, index, marker, false));
  const size_t at = whole.find(quoted);
  prefix_ = whole.substr(0, at);
  suffix_ = whole.substr(at + quoted.size());
}

std::string DeltaEvents::event(const std::string& text) const {
  return prefix_ + json(text).dump(-1, ' ', false, json::error_handler_t::replace) + suffix_;
}

std::string sse_event(const nlohmann::json& data) {
  return "data: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace dspark::serve
