//===- Server.h - the OpenAI-compatible HTTP front of the engine -*- C++ -*-===//
//
// Routes, over the HTTP layer (Http.h):
//   POST /v1/completions, /v1/chat/completions   JSON, or server-sent events
//   GET  /v1/models, /v1/models/{id}
//   POST /tokenize, /detokenize; GET /tokenizer_info   (vLLM's; what
//        lm-evaluation-harness's remote tokenizer calls)
//   GET  /health, /metrics                            (no key asked)
// With API keys, every route but /health and /metrics needs one. Each
// generation request holds one of --max-connections slots while it runs;
// beyond them it is answered 503 at once. Until the weights are verified
// (Readiness), /health is 503 and generation requests are refused 503.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_SERVER_H
#define MOE_SERVE_SERVER_H

#include "moe/runtime/EngineService.h"
#include "moe/serve/ApiKeys.h"
#include "moe/serve/Http.h"
#include "moe/serve/Metrics.h"
#include "moe/serve/OpenAi.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>

namespace moe::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000; ///< 0: any free port
  int64_t maxConnections = 64; ///< generation requests answered at once
  double requestTimeout = 600; ///< seconds
  http::Limits limits;
  int workers = 2; ///< threads that parse requests and render templates
  std::optional<ApiKeys> apiKeys;
};

/// Whether the weights may serve: still being verified, verified, or found
/// corrupt (the detail names the tensor).
struct Readiness {
  enum class State { Loading, Ready, Failed };
  State state = State::Ready;
  std::string detail;
  uint64_t verifiedBytes = 0, totalBytes = 0;
};

class Server {
public:
  /// `readiness` is asked on every /health and generation request; `log`
  /// takes one line (the server's notices: fields accepted but ignored).
  Server(rt::EngineService &service, ModelInfo model, Metrics &metrics, ServeOptions options,
         std::function<Readiness()> readiness, std::function<void(const std::string &)> log);
  ~Server();
  /// Binds the address; an error saying why it cannot.
  rt::Status bind();
  int port() const;
  /// Serves until stop(); blocks.
  void run();
  /// Waits up to `timeout` for the generation requests being answered to
  /// be written out; whether they were.
  bool waitAnswered(std::chrono::milliseconds timeout);
  /// Stops accepting connections and closes the open ones.
  void stop();

private:
  struct Slot;
  std::vector<http::Route> routes();
  http::Reply generate(bool chat, const http::Request &request);
  http::Response tokenize(const http::Request &request);
  http::Response detokenize(const http::Request &request);
  http::Response health();
  /// Logs each ignored field the first time a request sends it.
  void noteIgnored(const std::vector<std::string> &fields);
  std::shared_ptr<Slot> takeSlot();
  /// A unique answer id: `prefix` and 24 random hex digits.
  std::string newId(const char *prefix);

  rt::EngineService &service_;
  const ModelInfo model_;
  Metrics &metrics_;
  const ServeOptions options_;
  const std::function<Readiness()> readiness_;
  const std::function<void(const std::string &)> log_;
  std::unique_ptr<http::Server> http_;
  std::atomic<int64_t> active_{0};
  std::mutex mutex_; ///< guards ignored_ and ids_
  std::set<std::string> ignored_;
  std::mt19937_64 ids_;
};

} // namespace moe::serve

#endif
