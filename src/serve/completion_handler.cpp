#include "serve/completion_handler.h"

#include <atomic>
#include <ctime>
#include <random>

#include "common/error.h"
#include "serve/http_connection.h"
#include "serve/text_stream.h"

namespace dspark::serve {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// How often a waiting handler looks at its client's connection: a client that left is noticed
// within this, and its request cancelled at the next engine step.
constexpr milliseconds kPoll{20};

std::vector<int64_t> prompt_ids(const Backend& b, const CompletionRequest& r) {
  if (r.endpoint == Endpoint::kCompletions && !r.prompt_text) return r.prompt_ids;
  std::string text;
  if (r.endpoint == Endpoint::kChat) {
    if (!b.chat_template) throw ApiError(400, "this model has no chat template; use /v1/completions");
    text = b.chat_template->render(r.messages, {.add_generation_prompt = true, .enable_thinking = r.enable_thinking});
  } else {
    text = *r.prompt_text;
  }
  const std::vector<int32_t> ids = b.tokenizer->encode(text);
  return {ids.begin(), ids.end()};
}

sampling::SamplingParams sampling_params(const model::GenerationConfig& g, const CompletionRequest& r) {
  sampling::SamplingParams p = engine::sampling_defaults(g);
  p.temperature = r.temperature.value_or(p.temperature);
  p.top_k = r.top_k.value_or(p.top_k);
  p.top_p = r.top_p.value_or(p.top_p);
  p.min_p = r.min_p.value_or(p.min_p);
  // Without a seed each request draws a fresh one (as OpenAI and vLLM do).
  static std::atomic<uint64_t> counter{std::random_device{}()};
  p.seed = r.seed.value_or(counter.fetch_add(0x9E3779B97F4A7C15ULL));
  return p;
}

std::string response_id(Endpoint endpoint) {
  static std::atomic<uint64_t> next{static_cast<uint64_t>(std::time(nullptr)) << 20};
  return std::string(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(next.fetch_add(1));
}

bool client_gone() {
  const Connection* c = Connection::current();
  return c && c->peer_closed();
}

// One request's choices in flight.
struct Choices {
  std::vector<std::shared_ptr<RequestChannel>> channels;
  std::vector<std::optional<engine::RequestOutcome>> outcomes;

  void cancel() {
    for (auto& c : channels) c->cancel();
  }
  bool done() const {
    for (const auto& o : outcomes)
      if (!o) return false;
    return true;
  }
};

Choices submit_all(const Backend& b, std::vector<engine::EngineRequest> requests, const std::string& id) {
  Choices choices;
  try {
    choices.channels = b.service->submit(std::move(requests), id);
  } catch (const QueueFull& e) {
    throw ApiError(503, e.what());
  } catch (const ShuttingDown& e) {
    throw ApiError(503, e.what());
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  choices.outcomes.resize(choices.channels.size());
  return choices;
}

ChoiceOutcome choice_outcome(int64_t index, const engine::RequestOutcome& o) {
  return {.index = index, .text = o.text, .finish_reason = o.finish_reason, .stats = o.stats};
}

void respond_whole(const ResponseHead& head, Choices& choices, int64_t prompt_tokens, httplib::Response& res) {
  while (!choices.done()) {
    if (client_gone()) return choices.cancel();  // nobody to answer
    for (size_t i = 0; i < choices.channels.size(); ++i)
      if (!choices.outcomes[i])
        if (auto u = choices.channels[i]->wait(kPoll); u.outcome) choices.outcomes[i] = std::move(u.outcome);
  }
  std::vector<ChoiceOutcome> out;
  for (size_t i = 0; i < choices.outcomes.size(); ++i) {
    const engine::RequestOutcome& o = *choices.outcomes[i];
    if (o.finish_reason == "error") throw ApiError(500, "generation failed: " + o.text);
    if (o.finish_reason == "cancelled") throw ApiError(503, "the request was cancelled: the server is shutting down");
    out.push_back(choice_outcome(static_cast<int64_t>(i), o));
  }
  res.status = 200;
  res.set_content(completion_response(head, out, prompt_tokens).dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

// The state of one SSE response between calls of httplib's content provider.
struct Stream {
  ResponseHead head;
  Choices choices;
  std::vector<TextStream> texts;
  std::vector<DeltaEvents> deltas;  // per choice
  int64_t prompt_tokens = 0;
  bool include_usage = false;
  bool started = false;
  size_t next = 0;  // the choice to wait on next (round robin)

  // Writes one event; false when the client is gone.
  static bool send(httplib::DataSink& sink, const std::string& event) { return sink.write(event.data(), event.size()); }

  // One call of the provider: at most one wait, then everything that is ready. Returns false to
  // abort (the client left); calls sink.done() at the end of the stream.
  bool pump(httplib::DataSink& sink) {
    if (!started) {
      started = true;
      if (head.endpoint == Endpoint::kChat)
        for (size_t i = 0; i < texts.size(); ++i)
          if (!send(sink, sse_event(delta_chunk(head, static_cast<int64_t>(i), "", true)))) return abandon();
    }
    if (client_gone()) return abandon();
    // Wait on one unfinished choice (round robin), then take what the others have without waiting.
    const size_t n = choices.channels.size();
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (next + k) % n;
      if (choices.outcomes[i]) continue;
      next = i + 1;
      RequestChannel::Update u = choices.channels[i]->wait(kPoll);
      if (!deliver(sink, i, u)) return abandon();
      break;
    }
    for (size_t i = 0; i < n; ++i) {
      if (choices.outcomes[i]) continue;
      RequestChannel::Update u = choices.channels[i]->wait(milliseconds(0));
      if (!deliver(sink, i, u)) return abandon();
    }
    if (!choices.done()) return true;
    if (include_usage) {
      int64_t completion_tokens = 0;
      for (const auto& o : choices.outcomes) completion_tokens += o->stats.generated_tokens;
      if (!send(sink, sse_event(usage_chunk(head, prompt_tokens, completion_tokens)))) return abandon();
    }
    if (!send(sink, kSseDone)) return abandon();
    sink.done();
    return true;
  }

  // Sends what choice i produced; false when the client is gone.
  bool deliver(httplib::DataSink& sink, size_t i, RequestChannel::Update& u) {
    const int64_t index = static_cast<int64_t>(i);
    if (!u.tokens.empty())
      if (std::string text = texts[i].push(u.tokens); !text.empty())
        if (!send(sink, deltas[i].event(text))) return false;
    if (!u.outcome) return true;
    choices.outcomes[i] = std::move(u.outcome);
    const engine::RequestOutcome& o = *choices.outcomes[i];
    if (o.finish_reason == "error" || o.finish_reason == "cancelled") return fail(sink, o);
    if (std::string rest = texts[i].finish(o.text); !rest.empty())
      if (!send(sink, deltas[i].event(rest))) return false;
    return send(sink, sse_event(finish_chunk(head, choice_outcome(index, o))));
  }

  // An error after the stream began: an error event, and the stream ends without [DONE].
  bool fail(httplib::DataSink& sink, const engine::RequestOutcome& o) {
    const ApiError e = o.finish_reason == "error" ? ApiError(500, "generation failed: " + o.text)
                                                  : ApiError(503, "the request was cancelled: the server is shutting down");
    send(sink, sse_event(error_json(e)));
    choices.cancel();
    sink.done();
    return true;
  }

  bool abandon() {
    choices.cancel();
    return false;
  }
};

}  // namespace

std::vector<engine::EngineRequest> engine_requests(const Backend& b, const CompletionRequest& r) {
  engine::EngineRequest base;
  base.prompt_ids = prompt_ids(b, r);
  base.sampling = sampling_params(b.generation, r);
  const int64_t prompt = static_cast<int64_t>(base.prompt_ids.size());
  // OpenAI's defaults: completions 16 tokens, chat up to the context.
  const int64_t room = std::max<int64_t>(1, b.context_limit - prompt);
  base.max_tokens = r.max_tokens.value_or(r.endpoint == Endpoint::kCompletions ? std::min<int64_t>(16, room) : room);
  if (!r.ignore_eos) base.stop_ids = b.generation.eos_token_ids;
  base.stop_ids.insert(base.stop_ids.end(), r.stop_token_ids.begin(), r.stop_token_ids.end());
  for (int64_t id : r.stop_token_ids)
    if (id >= b.service->limits().vocab_size)
      throw ApiError(400, "'stop_token_ids' holds " + std::to_string(id) + ", outside the vocabulary", "stop_token_ids");
  base.stop_strings = r.stop;
  base.speculate = r.speculative && b.speculative;
  try {
    engine::check_request(base, b.service->limits());
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "", prompt + base.max_tokens > b.context_limit ? "exceed_context_size_error" : "");
  }
  std::vector<engine::EngineRequest> requests(static_cast<size_t>(r.n), base);
  for (size_t i = 0; i < requests.size(); ++i) requests[i].sampling.seed = base.sampling.seed + i;
  return requests;
}

void handle_completion(const Backend& b, const std::string& body, httplib::Response& res, Endpoint endpoint) {
  const CompletionRequest request = parse_completion_request(body, endpoint);
  if (!request.model.empty() && request.model != b.model_id)
    throw ApiError(404, "the model '" + request.model + "' does not exist; this server serves '" + b.model_id + "'",
                   "model");
  std::vector<engine::EngineRequest> requests = engine_requests(b, request);
  const int64_t prompt_tokens = static_cast<int64_t>(requests[0].prompt_ids.size());
  const ResponseHead head{.endpoint = endpoint,
                          .id = response_id(endpoint),
                          .created = static_cast<int64_t>(std::time(nullptr)),
                          .model = b.model_id};
  Choices choices = submit_all(b, std::move(requests), head.id);
  if (!request.stream) return respond_whole(head, choices, prompt_tokens, res);

  auto stream = std::make_shared<Stream>();
  stream->head = head;
  stream->choices = std::move(choices);
  for (int64_t i = 0; i < request.n; ++i) {
    stream->texts.emplace_back(*b.tokenizer, request.stop);
    stream->deltas.emplace_back(head, i);
  }
  stream->prompt_tokens = prompt_tokens;
  stream->include_usage = request.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [stream](size_t, httplib::DataSink& sink) { return stream->pump(sink); },
      // The response ended (normally, or the client went away): nothing may keep running for it.
      [stream](bool) { stream->choices.cancel(); });
}

}  // namespace dspark::serve
