//===- Http.h - an HTTP/1.1 server that enforces its limits -----*- C++ -*-===//
//
// The HTTP layer of moe-serve, apart from the OpenAI protocol. Every limit
// holds on every path a request can take:
//  - headers: a time limit from the first byte (or from the end of the
//    previous response on a kept-alive connection) to the end of the
//    headers, a size limit on the request line and headers, a count limit
//    on the fields; checked before anything else, the API key included;
//  - bodies: a size limit that holds for chunked bodies too, checked
//    against Content-Length before a `100 Continue`, and a time limit;
//  - connections: idle ones cost no thread (the server is asynchronous);
//    at --max-open-connections a new connection closes the longest-idle
//    one rather than wait, and is refused (503) only when every open
//    connection is answering a request.
// Every request read in full gets an answer, in order (pipelining), also
// after the client half-closes and on HTTP/1.0 (no chunked encoding there:
// a streamed body ends with the connection). A client that leaves while
// its answer is produced abandons it (Producer::abandon).
//
// Handlers see no Boost type: a Request in, a Reply out; a Reply produced
// over time is a Producer that the connection polls when woken.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_HTTP_H
#define MOE_SERVE_HTTP_H

#include "moe/abi/Status.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moe::serve::http {

struct Limits {
  /// The request line and header fields, in bytes (431 beyond).
  size_t headerBytes = 16 << 10;
  /// Header fields (431 beyond).
  size_t headerFields = 100;
  /// The body, as Content-Length or as chunks (413 beyond).
  size_t bodyBytes = 1 << 20;
  /// From a new connection, or the first byte of a request on a kept-alive
  /// one, to the end of its headers.
  std::chrono::milliseconds headerTime{10000};
  /// From the end of the headers to the end of the body.
  std::chrono::milliseconds bodyTime{30000};
  /// A kept-alive connection waits this long for its next request.
  std::chrono::milliseconds idleTime{5000};
  /// One write of a response may take this long (a client that stops
  /// reading is dropped after it).
  std::chrono::milliseconds writeTime{30000};
  /// Connections open at once.
  size_t openConnections = 1024;
};

struct Header {
  std::string name, value;
};

struct Request {
  std::string method;
  std::string target; ///< as sent: the path and the query
  std::string path;   ///< the target without its query
  unsigned version = 11; ///< 10 (HTTP/1.0) or 11
  std::vector<Header> headers;
  std::string body;
  /// The value of the first field named `name` (any case); empty if none.
  std::string_view header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string contentType = "application/json";
  std::vector<Header> headers;
  std::string body;
};

/// An answer produced over time (a generation). The connection calls
/// start() once, then poll() each time it is woken and at least every
/// Server::kTick, until a Step says done; or abandon() instead, once, when
/// the client has gone or the server stops. Every call comes from the
/// connection's own strand, never two at once.
class Producer {
public:
  struct Head {
    int status = 200;
    std::string contentType;
    std::vector<Header> headers;
  };
  struct Step {
    /// The status and header fields: once, before or with the first
    /// bytes. A head that comes with done is answered with a
    /// Content-Length; otherwise the body is chunked (HTTP/1.1) or ends
    /// with the connection (HTTP/1.0).
    std::optional<Head> head;
    std::string bytes;
    bool done = false;
  };
  virtual ~Producer() = default;
  /// `wake` asks for the next poll; it may be called from any thread, any
  /// number of times, also after the answer is done.
  virtual void start(std::function<void()> wake) = 0;
  virtual Step poll() = 0;
  virtual void abandon() = 0;
};

/// What a handler answers: a whole response, or a producer.
struct Reply {
  Reply() = default; ///< no answer: the layer answers 500
  Reply(Response r) : response(std::move(r)) {}
  Reply(std::shared_ptr<Producer> p) : producer(std::move(p)) {}
  std::optional<Response> response;
  std::shared_ptr<Producer> producer;
};

using Handler = std::function<Reply(const Request &)>;

struct Route {
  std::string method; ///< GET, POST
  /// The path; ending in '/' with `prefix`, every path under it.
  std::string path;
  Handler handler;
  bool prefix = false;
  /// Needs Options::authorize's consent (asked after the headers, before
  /// the body is read).
  bool needsKey = false;
  /// Cheap and never blocks: runs on the I/O thread, so that it is answered
  /// while the workers are busy (health, metrics).
  bool runsInline = false;
};

struct Options {
  std::string host = "127.0.0.1";
  int port = 8000; ///< 0: any free port
  Limits limits;
  /// Threads that run non-inline handlers (parsing, templates, tokenizing).
  int workers = 2;
  /// Whether a request's headers carry what a route with needsKey wants.
  std::function<bool(const Request &)> authorize;
  /// The body of an error the HTTP layer answers itself (400, 401, 404,
  /// 405, 408, 413, 431, 500, 503), from its status and message.
  std::function<Response(int status, const std::string &message)> error;
  /// Told of every error answered by the layer itself (its status).
  std::function<void(int status)> rejected;
};

struct ConnectionCounts {
  int64_t open = 0, idle = 0;
  uint64_t accepted = 0, evicted = 0, refused = 0, timedOut = 0;
};

class Server {
public:
  /// How often a producer is polled when nothing wakes it.
  static constexpr std::chrono::milliseconds kTick{100};

  Server(Options options, std::vector<Route> routes);
  ~Server();
  Server(const Server &) = delete;
  Server &operator=(const Server &) = delete;
  /// Binds and listens; an error saying why it cannot (a port in use is
  /// one: no SO_REUSEPORT).
  rt::Status bind();
  int port() const;
  /// Serves until stop(); blocks.
  void run();
  /// Closes the listening socket and every connection; the producers of
  /// unfinished answers are abandoned. Any thread.
  void stop();
  ConnectionCounts counts() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace moe::serve::http

#endif
