// `dspark serve`'s HTTP side: an OpenAI-compatible API over the engine service, on cpp-httplib.
//
//   POST /v1/chat/completions, /v1/completions   (streamed as SSE or not; openai_protocol.h)
//   GET  /v1/models, /health, /metrics, /stats, /   (the dashboard page)
//   POST /tokenize, /detokenize
//
// The server listens before the model is loaded (GET /health answers 503 until then, everything
// else 503 too) and serves once set_backend() hands it the loaded model. Errors are OpenAI's
// envelope; an error after a stream began is a `data: {"error": ...}` event and the stream ends
// without [DONE]. A client that disconnects has its request cancelled at the next engine step.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/config.h"
#include "serve/engine_service.h"
#include "serve/server_metrics.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dspark::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (see HttpServer::port)
  std::string api_key;              // empty: no authentication
  int64_t max_body_bytes = 1 << 20;
  std::chrono::milliseconds timeout{60'000};  // per read/write, and for reading a whole request
  int64_t threads = 32;             // connections handled at once (a streaming request holds one)
};

// What the handlers serve: the loaded model, its tokenizer and the engine service.
struct Backend {
  std::string model_id;             // the name clients send in "model"
  std::string model_root;           // where it was loaded from (/v1/models' root)
  const tokenizer::Tokenizer* tokenizer = nullptr;
  std::optional<tokenizer::ChatTemplate> chat_template;  // none: chat requests are refused
  model::GenerationConfig generation;
  int64_t context_limit = 0;        // prompt + max_tokens, at most
  bool speculative = false;         // a drafter is loaded
  EngineService* service = nullptr;
  ServerMetrics* metrics = nullptr;
};

class HttpServer {
 public:
  // Binds and starts listening on a thread of its own; throws dspark::Error when it cannot bind.
  explicit HttpServer(HttpOptions options);
  ~HttpServer();  // stop()s

  int port() const;
  // From now on requests are served (until then: 503). The backend must outlive the server.
  void set_backend(const Backend* backend);
  // Refuse new completions with 503 (SIGTERM: the engine service drains the running ones).
  void stop_accepting();
  // Closes the listening socket and waits for the connections' threads.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dspark::serve
