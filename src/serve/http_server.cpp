#include "serve/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "serve/completion_handler.h"
#include "serve/dashboard.h"
#include "serve/http_connection.h"
#include "serve/openai_protocol.h"

namespace dspark::serve {

namespace {

using nlohmann::json;

// httplib's server, processing each connection over our Connection (http_connection.h) instead
// of its own socket stream; everything else (parsing, routing, chunked writing) is httplib's.
class Listener : public httplib::Server {
 public:
  explicit Listener(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  // httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once (64 streaming
  // users reconnecting) overflows it and connections stall or fail. Listening again on the bound
  // socket raises the backlog.
  void widen_backlog() { ::listen(svr_sock_, SOMAXCONN); }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool ok = false;
    {
      Connection connection(sock, timeout_);
      const auto stopped = [this] { return svr_sock_ == INVALID_SOCKET; };
      const auto keep_alive = std::chrono::milliseconds(1000 * keep_alive_timeout_sec_);
      for (size_t left = keep_alive_max_count_; left > 0 && !stopped(); --left) {
        if (!connection.wait_for_request(left == keep_alive_max_count_ ? timeout_ : keep_alive, stopped)) break;
        connection.set_read_deadline(Connection::Clock::now() + timeout_);
        bool closed = false;
        ok = process_request(connection, left == 1, closed, nullptr);
        if (!ok || closed) break;
      }
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
  }

  std::chrono::milliseconds timeout_;
};

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status(), error_json(e));
  if (e.status() == 503) res.set_header("Retry-After", "1");
}

}  // namespace

struct HttpServer::Impl {
  HttpOptions options;
  Listener server;
  std::thread thread;
  int port = 0;
  std::atomic<const Backend*> backend{nullptr};
  std::atomic<bool> accepting{true};

  explicit Impl(HttpOptions o) : options(std::move(o)), server(options.timeout) {}

  // Runs a handler with the backend it needs, answering ApiErrors (and anything unexpected) in
  // OpenAI's envelope. The request has been read in full: its read deadline ends here.
  template <typename F>
  httplib::Server::Handler route(F handler, bool needs_backend = true) {
    return [this, handler, needs_backend](const httplib::Request& req, httplib::Response& res) {
      if (Connection* c = Connection::current()) c->set_read_deadline(std::nullopt);
      try {
        const Backend* b = backend.load();
        if (needs_backend && !b) throw ApiError(503, "the model is loading");
        handler(b, req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Error& e) {
        send_error(res, ApiError(400, e.what()));
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, std::string("internal error: ") + e.what()));
      }
    };
  }

  bool authorized(const httplib::Request& req) const {
    if (options.api_key.empty() || req.path == "/health" || req.path == "/") return true;
    return req.get_header_value("Authorization") == "Bearer " + options.api_key;
  }

  void install_routes();
};

void HttpServer::Impl::install_routes() {
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "missing or wrong API key (send 'Authorization: Bearer KEY')"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib answers unknown routes (404) and oversized bodies (413) with an empty body: fill in
  // the envelope.
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) send_error(res, ApiError(404, "no route " + req.method + " " + req.path));
    else if (res.status == 413) send_error(res, ApiError(413, "the request body is larger than the server accepts"));
    else send_error(res, ApiError(res.status, "the request could not be served (HTTP " + std::to_string(res.status) + ")"));
  });

  server.Get("/health", route([](const Backend* b, const httplib::Request&, httplib::Response& res) {
    if (!b) throw ApiError(503, "Loading model");
    send_json(res, 200, {{"status", "ok"}});
  }, false));
  server.Get("/", route([](const Backend*, const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(dashboard_html()), "text/html; charset=utf-8");
  }, false));
  server.Get("/v1/models", route([](const Backend* b, const httplib::Request&, httplib::Response& res) {
    const ServerInfo& info = b->metrics->info();
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", b->model_id},
                                      {"object", "model"},
                                      {"created", static_cast<int64_t>(std::time(nullptr))},
                                      {"owned_by", "dspark"},
                                      {"root", b->model_root},
                                      {"parent", nullptr},
                                      {"max_model_len", b->context_limit},
                                      {"meta",
                                       {{"drafter", info.drafter.empty() ? json() : json(info.drafter)},
                                        {"schedule", info.schedule},
                                        {"gamma", info.gamma},
                                        {"max_concurrency", info.max_concurrency}}}}})}});
  }));
  server.Get("/metrics", route([](const Backend* b, const httplib::Request&, httplib::Response& res) {
    res.set_content(b->metrics->prometheus(), "text/plain; version=0.0.4");
  }));
  server.Get("/stats", route([](const Backend* b, const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, b->metrics->stats());
  }));
  server.Post("/tokenize", route([](const Backend* b, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_json_object(req.body);
    if (!body.contains("content") || !body["content"].is_string()) throw ApiError(400, "'content' must be a string", "content");
    const std::vector<int32_t> ids = b->tokenizer->encode(body["content"].get<std::string>());
    if (body.value("with_pieces", false)) {
      json pieces = json::array();
      for (int32_t id : ids) pieces.push_back({{"id", id}, {"piece", b->tokenizer->token_bytes(id)}});
      return send_json(res, 200, {{"tokens", pieces}});
    }
    send_json(res, 200, {{"tokens", ids}});
  }));
  server.Post("/detokenize", route([](const Backend* b, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_json_object(req.body);
    if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "'tokens' must be an array", "tokens");
    std::vector<int32_t> ids;
    for (const json& t : body["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX ||
          !b->tokenizer->has_id(t.get<int32_t>()))
        throw ApiError(400, "'tokens' holds " + t.dump() + ", which is not a token id of this model", "tokens");
      ids.push_back(t.get<int32_t>());
    }
    send_json(res, 200, {{"content", b->tokenizer->decode(ids)}});
  }));
  for (const auto& [path, endpoint] : {std::pair{"/v1/chat/completions", Endpoint::kChat},
                                       std::pair{"/v1/completions", Endpoint::kCompletions}}) {
    server.Post(path, route([this, endpoint = endpoint](const Backend* b, const httplib::Request& req, httplib::Response& res) {
      if (!accepting) throw ApiError(503, "the server is shutting down");
      handle_completion(*b, req, res, endpoint);
    }));
  }
}

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  s.server.set_payload_max_length(static_cast<size_t>(s.options.max_body_bytes));
  const time_t seconds = static_cast<time_t>(s.options.timeout.count() / 1000);
  const time_t micros = static_cast<time_t>(s.options.timeout.count() % 1000 * 1000);
  s.server.set_read_timeout(seconds, micros);
  s.server.set_write_timeout(seconds, micros);
  const size_t threads = static_cast<size_t>(std::max<int64_t>(1, s.options.threads));
  s.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Keep-alive connections stay up (httplib closes them after 5 requests by default, and every
  // reconnect of a busy client costs a handshake and risks the accept queue).
  s.server.set_keep_alive_max_count(100000);
  s.install_routes();
  s.port = s.options.port == 0 ? s.server.bind_to_any_port(s.options.host)
                               : (s.server.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1);
  if (s.port < 0)
    throw Error("serve: cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                " (in use, or not an address of this machine)");
  s.server.widen_backlog();
  s.thread = std::thread([&s] { s.server.listen_after_bind(); });
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port; }

void HttpServer::set_backend(const Backend* backend) { impl_->backend = backend; }

void HttpServer::stop_accepting() { impl_->accepting = false; }

void HttpServer::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace dspark::serve
