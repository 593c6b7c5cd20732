#include "bench/http_serve_bench.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/http_stream.h"
#include "common/error.h"

namespace dspark::bench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Threads are the clients: beyond this many the machine measures itself, not the server.
constexpr int64_t kMaxClients = 4096;
// The start of a failing server's answer is enough to say why it failed.
constexpr size_t kMaxErrorBody = 300;

// "http://host:port/base/" -> origin "http://host:port" (what httplib::Client takes) and base
// path "/base" (prefixed to every route, for servers mounted below the root).
struct Url {
  std::string origin, base;
  std::string text() const { return origin + base; }  // for messages
};

Url parse_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const std::string scheme = url.substr(0, scheme_end);
  const size_t path = scheme_end == std::string::npos ? std::string::npos : url.find('/', scheme_end + 3);
  if (scheme_end == std::string::npos || (scheme != "http" && scheme != "https") ||
      (path == std::string::npos ? url.size() : path) == scheme_end + 3)
    throw Error("--url: '" + url + "' is not http://HOST:PORT (or https://, optionally with a base path)");
  Url u{url.substr(0, path), path == std::string::npos ? "" : url.substr(path)};
  while (!u.base.empty() && u.base.back() == '/') u.base.pop_back();
  // An OpenAI client's base URL (http://HOST:PORT/v1): the routes below carry their /v1.
  if (u.base.size() >= 3 && u.base.compare(u.base.size() - 3, 3, "/v1") == 0) u.base.resize(u.base.size() - 3);
  return u;
}

std::string route(const HttpRequestOptions& o) {
  if (o.endpoint == "chat") return "/v1/chat/completions";
  if (o.endpoint == "completions") return "/v1/completions";
  throw Error("--endpoint must be chat or completions, not '" + o.endpoint + "'");
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void configure(httplib::Client& client, const HttpEndpoint& e) {
  // httplib's default read timeout (5 s) would cut a long prefill or a slow server's stream.
  const auto timeout = std::chrono::milliseconds(std::llround(e.timeout_s * 1e3));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  client.set_keep_alive(true);  // a closed-loop client reuses its connection, as a real one would
  // httplib writes a request's headers and body in two sends: with Nagle's algorithm the body waits
  // for the server's delayed ACK (40 ms on Linux), which would land in every TTFT.
  client.set_tcp_nodelay(true);
  if (!e.api_key.empty()) client.set_bearer_token_auth(e.api_key);
}

// One streamed request on client: the record of what it saw. Never throws; failures are recorded.
RequestRecord stream_request(httplib::Client& client, const std::string& path, const std::string& body,
                             double timeout_s) {
  StreamRecorder recorder;
  SseParser sse;
  int status = 0;
  std::string error_body;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  const Clock::time_point t0 = Clock::now();
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {  // an error answer: keep its start for the report
      error_body.append(data, std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
      return true;
    }
    const double t = seconds_since(t0);  // every event in this piece arrived now
    for (const std::string& event : sse.feed({data, n})) recorder.on_event(event, t);
    return t <= timeout_s;  // past the deadline: cancel (httplib's timeout only bounds each read)
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  if (seconds_since(t0) > timeout_s) recorder.fail("timed out after " + std::to_string(timeout_s) + " s");
  else if (!sent) recorder.fail("HTTP client: " + httplib::to_string(error));
  else if (status != 200) recorder.fail("HTTP " + std::to_string(status) + ": " + error_body);
  return recorder.finish(seconds_since(t0));
}

// The schedule a server names in its model listing, where it names one.
std::string schedule_of(const json& model) {
  for (const char* key : {"metadata", "meta"}) {
    const auto meta = model.find(key);
    if (meta != model.end() && meta->is_object() && meta->contains("schedule") && (*meta)["schedule"].is_string())
      return (*meta)["schedule"].get<std::string>();
  }
  const auto direct = model.find("schedule");
  return direct != model.end() && direct->is_string() ? direct->get<std::string>() : "";
}

// Each family's difference where both scrapes have it.
ServerCounters counters_delta(const ServerCounters& after, const ServerCounters& before) {
  ServerCounters d;
  if (after.spec && before.spec) d.spec = bench::counters_delta(*after.spec, *before.spec);
  if (after.engine && before.engine) d.engine = bench::counters_delta(*after.engine, *before.engine);
  return d;
}

}  // namespace

std::vector<double> poisson_arrivals(int64_t n, double rate, uint64_t seed) {
  if (!(rate > 0)) throw Error("--request-rate must be > 0 (or inf), not " + std::to_string(rate));
  std::vector<double> arrivals(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0);
  if (std::isinf(rate)) return arrivals;
  std::mt19937_64 gen(seed);
  std::exponential_distribution<double> gap(rate);
  for (size_t i = 1; i < arrivals.size(); ++i) arrivals[i] = arrivals[i - 1] + gap(gen);
  return arrivals;
}

std::string request_body(const HttpRequestOptions& o, const std::string& prompt, int64_t i) {
  json body = {{"model", o.model},
               {"max_tokens", o.max_tokens},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"seed", o.seed + static_cast<uint64_t>(i)}};
  if (o.endpoint == "completions") body["prompt"] = prompt;
  else body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
  if (o.temperature) body["temperature"] = *o.temperature;
  if (o.top_k) body["top_k"] = *o.top_k;
  if (o.top_p) body["top_p"] = *o.top_p;
  if (o.ignore_eos) body["ignore_eos"] = true;
  // A prompt file may hold invalid UTF-8; replace it rather than fail the request in the client.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

ServerInfo fetch_server_info(const HttpEndpoint& e, const std::string& model_name) {
  const Url url = parse_url(e.url);
  httplib::Client client(url.origin);
  configure(client, e);
  const httplib::Result res = client.Get(url.base + "/v1/models");
  if (!res)
    throw Error("bench serve: cannot reach " + e.url + " (GET /v1/models: " + httplib::to_string(res.error()) + ")");
  const json listing = res->status == 200 ? json::parse(res->body, nullptr, false) : json();
  const json* first = nullptr;
  if (listing.is_object() && listing.contains("data") && listing["data"].is_array() && !listing["data"].empty() &&
      listing["data"][0].is_object())
    first = &listing["data"][0];
  ServerInfo info{model_name, first ? schedule_of(*first) : ""};
  if (info.model.empty() && first && first->contains("id") && (*first)["id"].is_string())
    info.model = (*first)["id"].get<std::string>();
  if (res->status == 401)
    throw Error("bench serve: " + url.text() + "/v1/models answered HTTP 401: the server wants its API key (--api-key missing or wrong)");
  if (info.model.empty())
    throw Error("bench serve: " + url.text() + "/v1/models (HTTP " + std::to_string(res->status) +
                ") lists no model; pass --model-name");
  return info;
}

ServerCounters scrape_counters(const HttpEndpoint& e) {
  const Url url = parse_url(e.url);
  httplib::Client client(url.origin);
  configure(client, e);
  const httplib::Result res = client.Get(url.base + "/metrics");
  if (!res || res->status != 200) return {};
  const std::vector<PromSample> samples = parse_prometheus(res->body);
  return {find_spec_counters(samples), find_engine_counters(samples)};
}

void check_one_request(const HttpEndpoint& e, const HttpRequestOptions& o, const std::string& prompt) {
  const Url url = parse_url(e.url);
  httplib::Client client(url.origin);
  configure(client, e);
  const RequestRecord r = stream_request(client, url.base + route(o), request_body(o, prompt, 0), e.timeout_s);
  if (!r.success) throw Error("bench serve: the test request to " + url.text() + route(o) + " failed: " + r.error);
}

HttpRun run_http_load(const HttpEndpoint& e, const HttpRequestOptions& o, const std::vector<std::string>& prompts,
                      const HttpLoad& load) {
  if (prompts.empty()) throw Error("bench serve: no prompts");
  if (load.num_requests < 1) throw Error("bench serve: --num-prompts must be >= 1");
  const Url url = parse_url(e.url);
  const std::string path = url.base + route(o);
  const std::vector<double> arrivals = poisson_arrivals(load.num_requests, load.request_rate, load.seed);
  const int64_t n = load.num_requests;
  const int64_t n_clients = load.max_concurrency > 0 ? std::min(load.max_concurrency, n) : n;
  if (n_clients > kMaxClients)
    throw Error("bench serve: " + std::to_string(n_clients) + " clients in flight is beyond " +
                std::to_string(kMaxClients) + "; set --max-concurrency");

  const ServerCounters before = scrape_counters(e);
  HttpRun run;
  run.records.resize(static_cast<size_t>(n));
  std::atomic<int64_t> next{0};
  const Clock::time_point t0 = Clock::now();
  auto client_loop = [&] {
    httplib::Client client(url.origin);
    configure(client, e);
    for (int64_t i = next++; i < n; i = next++) {
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrivals[static_cast<size_t>(i)])));
      const std::string body = request_body(o, prompts[static_cast<size_t>(i) % prompts.size()], i);
      run.records[static_cast<size_t>(i)] = stream_request(client, path, body, e.timeout_s);
    }
  };
  std::vector<std::thread> clients;
  for (int64_t c = 0; c < n_clients; ++c) clients.emplace_back(client_loop);
  for (std::thread& t : clients) t.join();
  run.seconds = seconds_since(t0);
  const ServerCounters after = scrape_counters(e);
  run.counters = counters_delta(after, before);
  return run;
}

}  // namespace dspark::bench
