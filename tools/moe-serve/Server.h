//===- Server.h - the OpenAI-compatible HTTP front of the engine -*- C++ -*-===//
//
// Routes (cpp-httplib): POST /v1/completions and /v1/chat/completions
// (JSON, or server-sent events with "stream": true), GET /v1/models,
// /health and /metrics. Each generation request holds one of
// --max-connections slots while it runs; beyond them it is answered 503 at
// once. A client that goes away mid-stream cancels its request, which frees
// its KV blocks; a request past --request-timeout is cancelled too.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOESERVE_SERVER_H
#define MOE_TOOLS_MOESERVE_SERVER_H

#include "tools/common/ApiKeys.h"
#include "tools/moe-serve/Metrics.h"
#include "tools/moe-serve/OpenAi.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

namespace httplib {
class Server;
struct Response;
} // namespace httplib

namespace moe::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000; ///< 0: any free port
  int64_t maxConnections = 64;
  double requestTimeout = 600; ///< seconds
  size_t maxBodyBytes = 1 << 20;
  std::optional<tools::ApiKeys> apiKeys;
};

class Server {
public:
  Server(rt::EngineService &service, ModelInfo model, Metrics &metrics, ServeOptions options);
  ~Server();
  /// Binds the address; an error saying why it cannot.
  rt::Status bind();
  int port() const { return port_; }
  /// Serves until stop(); blocks.
  void run();
  /// Waits up to `timeout` for the generation requests being answered to
  /// be written out; whether they were.
  bool waitAnswered(std::chrono::milliseconds timeout);
  /// Stops accepting connections and closes the open ones.
  void stop();

private:
  struct Slot;
  void routes();
  void generate(bool chat, const std::string &body, httplib::Response &res);
  std::unique_ptr<Slot> takeSlot();

  rt::EngineService &service_;
  const ModelInfo model_;
  Metrics &metrics_;
  const ServeOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  int listening_ = -1; ///< the listening socket
  std::atomic<int64_t> active_{0}, nextId_{0};
};

} // namespace moe::serve

#endif
