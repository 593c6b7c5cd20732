#include "bench/http_stream.h"

#include <nlohmann/json.hpp>

namespace dspark::bench {

namespace {

using nlohmann::json;

// A non-empty string at j[key], if there is one.
bool has_text(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

bool chunk_has_content(const json& choice) {
  const auto delta = choice.find("delta");
  if (delta != choice.end() && delta->is_object())
    return has_text(*delta, "content") || has_text(*delta, "reasoning_content");
  return has_text(choice, "text");
}

// usage[key] when it is a count, else fallback.
int64_t usage_count(const json& usage, const char* key, int64_t fallback) {
  const auto it = usage.find(key);
  return it != usage.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::string error_message(const json& error) {
  if (error.is_object() && error.contains("message") && error["message"].is_string())
    return error["message"].get<std::string>();
  return error.dump();
}

}  // namespace

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (const char c : bytes) {
    const bool lf_after_cr = after_cr_ && c == '\n';
    after_cr_ = c == '\r';
    if (lf_after_cr) continue;  // the \n of a \r\n: that line already ended at the \r
    if (c == '\r' || c == '\n') end_line(events);
    else line_ += c;
  }
  return events;
}

void SseParser::end_line(std::vector<std::string>& events) {
  if (line_.empty()) {  // a blank line dispatches the event, if it has data
    if (!data_.empty()) {
      data_.pop_back();  // the \n after the last data line
      events.push_back(std::move(data_));
    }
    data_.clear();
    return;
  }
  const size_t colon = line_.find(':');
  if (colon != 0 && line_.compare(0, colon, "data") == 0) {
    size_t value = colon == std::string::npos ? line_.size() : colon + 1;
    if (value < line_.size() && line_[value] == ' ') ++value;
    data_.append(line_, value, std::string::npos).push_back('\n');
  }
  line_.clear();
}

void StreamRecorder::on_event(std::string_view data, double t_s) {
  if (done() || data.empty()) return;
  last_event_s_ = t_s;
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) return fail("a stream event is not a JSON object: " + std::string(data.substr(0, 80)));
  if (chunk.contains("error")) return fail("error event: " + error_message(chunk["error"]));
  const auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty() && choices->front().is_object()) {
    const json& choice = choices->front();
    if (chunk_has_content(choice)) on_content(t_s);
    const auto reason = choice.find("finish_reason");
    finish_reason_ = finish_reason_ || (reason != choice.end() && !reason->is_null());
  }
  const auto usage = chunk.find("usage");
  if (usage != chunk.end() && usage->is_object()) {
    record_.prompt_tokens = usage_count(*usage, "prompt_tokens", record_.prompt_tokens);
    const int64_t completion = usage_count(*usage, "completion_tokens", -1);
    if (completion >= 0) {
      record_.output_tokens = completion;
      record_.usage_reported = true;
    }
  }
}

void StreamRecorder::on_content(double t_s) {
  if (record_.content_chunks == 0) record_.ttft_s = t_s;
  else record_.itl_s.push_back(t_s - record_.last_token_s);
  record_.last_token_s = t_s;
  ++record_.content_chunks;
}

void StreamRecorder::fail(std::string why) {
  if (record_.error.empty()) record_.error = why.empty() ? "failed" : std::move(why);
}

RequestRecord StreamRecorder::finish(double t_s) {
  if (record_.error.empty() && !done_ && !finish_reason_) fail("the stream ended before [DONE] or a finish_reason");
  record_.success = record_.error.empty();
  record_.e2el_s = last_event_s_ >= 0 ? last_event_s_ : t_s;
  if (!record_.usage_reported) record_.output_tokens = record_.content_chunks;
  return record_;
}

}  // namespace dspark::bench
