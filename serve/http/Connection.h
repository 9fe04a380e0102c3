//===- Connection.h - one client connection of the HTTP server --*- C++ -*-===//
//
// A connection is a coroutine on its own strand: read a request's headers
// under the header limits and time, ask the route's key, read the body
// under the body limits, run the handler (on the workers unless it runs
// inline), write the answer, and go on while the connection is kept alive.
// What it shares with the listener and the other connections is the
// ServerState.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_HTTP_CONNECTION_H
#define MOE_SERVE_HTTP_CONNECTION_H

#include "moe/serve/Http.h"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace moe::serve::http {

class Connection;

/// What the listener and every connection share.
struct ServerState {
  ServerState(Options o, std::vector<Route> r)
      : options(std::move(o)), routes(std::move(r)), workers(size_t(options.workers)) {}
  const Options options;
  const std::vector<Route> routes;
  boost::asio::thread_pool workers;
  std::atomic<bool> stopping{false};

  mutable std::mutex mutex; ///< guards the fields below
  std::unordered_map<Connection *, std::weak_ptr<Connection>> open;
  ConnectionCounts counts;

  /// An error answered by the layer itself.
  Response error(int status, const std::string &message) const;
};

class Connection : public std::enable_shared_from_this<Connection> {
public:
  Connection(ServerState &state, boost::asio::ip::tcp::socket socket);
  /// Runs the connection until it closes; it unregisters itself then.
  void start();
  /// Ends the connection from any thread: pending reads, writes and waits
  /// are cancelled, an unfinished producer is abandoned.
  void close();
  /// Waiting for or reading a request (not answering one), and since when.
  bool idle() const { return idle_.load(); }
  std::chrono::steady_clock::time_point idleSince() const;

private:
  using Stream = boost::beast::tcp_stream;
  boost::asio::awaitable<void> run();
  /// Reads the next request and finds its route; false when the connection
  /// is to close (an answer to a bad request, if one is due, is written).
  /// With no route, the layer answered it (404, 405) and the connection
  /// goes on. `served`: a request came before on this connection.
  boost::asio::awaitable<bool> read(Request &request, const Route *&route, bool &keepAlive,
                                    bool served);
  /// Shuts the sending side, drops what the client still sends for a
  /// while, and closes.
  boost::asio::awaitable<void> linger();
  /// Writes a layer error and marks the connection to close.
  boost::asio::awaitable<void> fail(unsigned version, int status, std::string message);
  boost::asio::awaitable<bool> write(const Request &request, const Response &response,
                                     bool keepAlive);
  /// Drives a producer to its end; whether the connection can go on.
  boost::asio::awaitable<bool> produce(const Request &request, Producer &producer,
                                       bool keepAlive);
  /// Whether the client has gone, while nothing of the answer is written;
  /// after a half-close an HTTP/1.1 client is asked with a `100 Continue`
  /// (which clients skip), whose reset shows a client that closed.
  boost::asio::awaitable<bool> clientGone(const Request &request);
  boost::asio::awaitable<Reply> handle(const Route &route, const Request &request);
  void setIdle(bool idle);

  ServerState &state_;
  Stream stream_;
  boost::beast::flat_buffer buffer_;
  boost::asio::steady_timer wake_;
  std::atomic<bool> idle_{true}, closing_{false};
  std::atomic<int64_t> idleSince_{0};
  std::chrono::steady_clock::time_point lastProbe_{};
};

} // namespace moe::serve::http

#endif
