#include "serve/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <ctime>
#include <map>
#include <optional>
#include <regex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "serve/completion_handler.h"
#include "serve/dashboard.h"
#include "serve/http_connection.h"
#include "serve/openai_protocol.h"
#include "tokenizer/unicode.h"

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
        if (!ok || closed || connection.closing()) break;
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

void close_after_response(httplib::Response& res) {
  if (Connection* c = Connection::current()) c->close_after_response();
  res.set_header("Connection", "close");
}

bool chunked(const httplib::Request& req) {
  std::string te = req.get_header_value("Transfer-Encoding");
  std::transform(te.begin(), te.end(), te.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return te == "chunked";
}

// A POST's body, read here through httplib's content reader rather than by httplib: httplib 0.11
// holds a body to the limit only when it comes with a Content-Length (a chunked one it reads
// whole, however long) and a form-encoded one to 8 KiB. A body not read to its end leaves the
// rest on the wire, so its connection closes after the answer.
std::string read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                      size_t max_bytes) {
  if (req.is_multipart_form_data()) {
    close_after_response(res);
    throw ApiError(415, "the request body must be JSON (Content-Type: application/json), not multipart form data");
  }
  std::string body;
  bool too_large = false;
  const bool read = reader([&](const char* data, size_t n) {
    too_large = body.size() + n > max_bytes;
    if (!too_large) body.append(data, n);
    return !too_large;
  });
  if (read) return body;
  close_after_response(res);
  if (too_large || res.status == 413)
    throw ApiError(413, "the request body is larger than the server accepts (--max-body-bytes " +
                            std::to_string(max_bytes) + ")");
  throw ApiError(400, "the request body could not be read in full");
}

// One model of /v1/models, with our `meta`.
json model_object(const Backend& b) {
  const ServerInfo& info = b.metrics->info();
  return {{"id", b.model_id},
          {"object", "model"},
          {"created", static_cast<int64_t>(std::time(nullptr))},
          {"owned_by", "dspark"},
          {"root", b.model_root},
          {"parent", nullptr},
          {"max_model_len", b.context_limit},
          {"meta",
           {{"drafter", info.drafter.empty() ? json() : json(info.drafter)},
            {"schedule", info.schedule},
            {"gamma", info.gamma},
            {"max_concurrency", info.max_concurrency}}}};
}

// A token's bytes for /tokenize's with_pieces: the text when they are valid UTF-8, else the byte
// values (a piece of a multi-byte character), as llama.cpp's server answers; JSON text would turn
// every such piece into the same U+FFFD.
json piece_json(const std::string& bytes) {
  if (!tokenizer::find_invalid_utf8(bytes)) return bytes;
  json values = json::array();
  for (unsigned char c : bytes) values.push_back(c);
  return values;
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

  std::map<std::string, std::string> methods;  // path -> the methods it answers (the Allow header of a 405)

  // Runs a handler, answering ApiErrors (and anything unexpected) in OpenAI's envelope.
  template <typename F>
  static void answer(httplib::Response& res, F&& run) {
    try {
      run();
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, ApiError(400, e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("internal error: ") + e.what()));
    }
  }
  const Backend* backend_or_loading() const {
    const Backend* b = backend.load();
    if (!b) throw ApiError(503, "the model is loading");
    return b;
  }

  // GET routes: the request has been read in full, so its read deadline ends here.
  template <typename F>
  void get(const std::string& path, F handler, bool needs_backend = true) {
    methods[path] = "GET, HEAD";
    server.Get(path, [this, handler, needs_backend](const httplib::Request& req, httplib::Response& res) {
      if (Connection* c = Connection::current()) c->set_read_deadline(std::nullopt);
      answer(res, [&] { handler(needs_backend ? backend_or_loading() : backend.load(), req, res); });
    });
  }
  // POST routes get the body as read_body reads it, within the request's read deadline.
  template <typename F>
  void post(const std::string& path, F handler) {
    methods[path] = "POST";
    server.Post(path, [this, handler](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader) {
      answer(res, [&] {
        const std::string body = read_body(req, res, reader, static_cast<size_t>(options.max_body_bytes));
        if (Connection* c = Connection::current()) c->set_read_deadline(std::nullopt);
        handler(backend_or_loading(), body, res);
      });
    });
  }

  // The methods a route answers (the Allow header of a 405); nullopt for a path no route takes.
  // Routes with a parameter (/v1/models/{id}) are matched as the server matches them.
  std::optional<std::string> allowed_methods(const std::string& path) const {
    if (const auto it = methods.find(path); it != methods.end()) return it->second;
    for (const auto& [route, allowed] : methods)
      if (route.find('(') != std::string::npos && std::regex_match(path, std::regex(route))) return allowed;
    return std::nullopt;
  }

  bool authorized(const httplib::Request& req) const {
    if (options.api_key.empty() || req.path == "/health" || req.path == "/") return true;
    return req.get_header_value("Authorization") == "Bearer " + options.api_key;
  }

  void install_routes();
};

void HttpServer::Impl::install_routes() {
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Browsers' clients on other origins (as llama.cpp's and vLLM's servers allow by default); a
    // preflight carries no API key.
    res.set_header("Access-Control-Allow-Origin", "*");
    if (req.method == "OPTIONS") {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "86400");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!authorized(req)) {  // refused before its body is read
      close_after_response(res);
      send_error(res, ApiError(401, "missing or wrong API key (send 'Authorization: Bearer KEY')"));
      return httplib::Server::HandlerResponse::Handled;
    }
    // Without either header httplib would read the body until the client closes, holding a
    // connection thread for the whole --timeout.
    if (req.method == "POST" && !req.has_header("Content-Length") && !chunked(req)) {
      close_after_response(res);
      send_error(res, ApiError(400, "the request has no body: send its JSON with a Content-Length (or chunked)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib answers unknown routes (404) and oversized bodies (413) with an empty body: fill in
  // the envelope. A known path asked with another method is a 405 naming the ones it takes.
  server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::optional<std::string> allowed = allowed_methods(req.path);
    if (res.status == 404 && allowed) {
      res.set_header("Allow", *allowed);
      send_error(res, ApiError(405, req.method + " is not allowed on " + req.path + " (" + *allowed + ")"));
    } else if (res.status == 404) {
      send_error(res, ApiError(404, "no route " + req.method + " " + req.path));
    } else if (res.status == 413) {
      send_error(res, ApiError(413, "the request body is larger than the server accepts"));
    } else {
      send_error(res, ApiError(res.status, "the request could not be served (HTTP " + std::to_string(res.status) + ")"));
    }
  });

  get("/health", [](const Backend* b, const httplib::Request&, httplib::Response& res) {
    if (!b) throw ApiError(503, "Loading model");
    send_json(res, 200, {{"status", "ok"}});
  }, false);
  get("/", [](const Backend*, const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(dashboard_html()), "text/html; charset=utf-8");
  }, false);
  get("/v1/models", [](const Backend* b, const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_object(*b)})}});
  });
  // OpenAI's retrieve (client.models.retrieve(id)).
  get(R"(/v1/models/([^/]+))", [](const Backend* b, const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != b->model_id)
      throw ApiError(404, "the model '" + id + "' does not exist; this server serves '" + b->model_id + "'", "model");
    send_json(res, 200, model_object(*b));
  });
  get("/metrics", [](const Backend* b, const httplib::Request&, httplib::Response& res) {
    res.set_content(b->metrics->prometheus(), "text/plain; version=0.0.4");
  });
  get("/stats", [](const Backend* b, const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, b->metrics->stats());
  });
  post("/tokenize", [](const Backend* b, const std::string& text, httplib::Response& res) {
    const json body = parse_json_object(text);
    if (!body.contains("content") || !body["content"].is_string()) throw ApiError(400, "'content' must be a string", "content");
    if (body.contains("with_pieces") && !body["with_pieces"].is_boolean())
      throw ApiError(400, "'with_pieces' must be true or false", "with_pieces");
    const std::vector<int32_t> ids = b->tokenizer->encode(body["content"].get<std::string>());
    if (body.value("with_pieces", false)) {
      json pieces = json::array();
      for (int32_t id : ids) pieces.push_back({{"id", id}, {"piece", piece_json(b->tokenizer->token_bytes(id))}});
      return send_json(res, 200, {{"tokens", pieces}});
    }
    send_json(res, 200, {{"tokens", ids}});
  });
  post("/detokenize", [](const Backend* b, const std::string& text, httplib::Response& res) {
    const json body = parse_json_object(text);
    if (!body.contains("tokens") || !body["tokens"].is_array()) throw ApiError(400, "'tokens' must be an array", "tokens");
    std::vector<int32_t> ids;
    for (const json& t : body["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX ||
          !b->tokenizer->has_id(t.get<int32_t>()))
        throw ApiError(400, "'tokens' holds " + t.dump() + ", which is not a token id of this model", "tokens");
      ids.push_back(t.get<int32_t>());
    }
    send_json(res, 200, {{"content", b->tokenizer->decode(ids)}});
  });
  for (const auto& [path, endpoint] : {std::pair{"/v1/chat/completions", Endpoint::kChat},
                                       std::pair{"/v1/completions", Endpoint::kCompletions}}) {
    post(path, [this, endpoint = endpoint](const Backend* b, const std::string& body, httplib::Response& res) {
      if (!accepting) throw ApiError(503, "the server is shutting down");
      handle_completion(*b, body, res, endpoint);
    });
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
