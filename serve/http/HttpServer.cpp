//===- HttpServer.cpp - the listener of the HTTP server -------------------===//
#include "serve/http/Connection.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>

namespace moe::serve::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);

/// Answers a connection beyond the limit with `response` and closes it.
asio::awaitable<void> refuse(tcp::socket socket, Response response) {
  beast::tcp_stream stream(std::move(socket));
  bhttp::response<bhttp::string_body> res;
  res.result(unsigned(response.status));
  res.set(bhttp::field::content_type, response.contentType);
  for (const Header &h : response.headers)
    res.insert(h.name, h.value);
  res.body() = std::move(response.body);
  res.keep_alive(false);
  res.prepare_payload();
  stream.expires_after(std::chrono::seconds(1));
  co_await bhttp::async_write(stream, res, kAwait);
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

} // namespace

std::string_view Request::header(std::string_view name) const {
  for (const Header &h : headers)
    if (h.name.size() == name.size() &&
        std::equal(name.begin(), name.end(), h.name.begin(), [](char a, char b) {
          return std::tolower(uint8_t(a)) == std::tolower(uint8_t(b));
        }))
      return h.value;
  return {};
}

struct Server::Impl {
  Impl(Options options, std::vector<Route> routes)
      : state(std::move(options), std::move(routes)), acceptor(io) {}

  asio::awaitable<void> accept();
  /// Makes room for one more connection by closing the longest-idle one;
  /// false when every open connection is answering a request.
  bool evictIdle();

  asio::io_context io{1};
  ServerState state;
  tcp::acceptor acceptor;
  int port = 0;
};

Server::Server(Options options, std::vector<Route> routes)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(routes))) {}

Server::~Server() {
  stop();
  impl_->state.workers.join();
}

rt::Status Server::bind() {
  const Options &o = impl_->state.options;
  const std::string where = o.host + ":" + std::to_string(o.port);
  beast::error_code ec;
  tcp::resolver resolver(impl_->io);
  auto endpoints = resolver.resolve(o.host, std::to_string(o.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty())
    return rt::Status::error("cannot listen on " + where + ": " +
                             (ec ? ec.message() : std::string("no such address")) +
                             "; pick another with --host");
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor &a = impl_->acceptor;
  // SO_REUSEADDR lets a restart bind while old connections linger in
  // TIME_WAIT; on Linux it never lets two servers listen on one port (that
  // would take SO_REUSEPORT, which is not set).
  if (a.open(endpoint.protocol(), ec); !ec)
    a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec)
    a.bind(endpoint, ec);
  if (!ec)
    a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return rt::Status::error("cannot listen on " + where + ": " + ec.message() +
                             (ec == asio::error::address_in_use
                                  ? " (another server listens there); pick another port with "
                                    "--port, or stop that server"
                                  : "; pick another with --host or --port"));
  impl_->port = a.local_endpoint().port();
  return rt::Status::ok();
}

int Server::port() const { return impl_->port; }

void Server::run() {
  if (impl_->state.stopping)
    return;
  asio::co_spawn(impl_->io, impl_->accept(), asio::detached);
  impl_->io.run();
}

void Server::stop() {
  ServerState &s = impl_->state;
  if (s.stopping.exchange(true))
    return;
  asio::post(impl_->io, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto &[raw, weak] : s.open)
      if (auto c = weak.lock())
        open.push_back(std::move(c));
  }
  for (auto &c : open)
    c->close();
}

ConnectionCounts Server::counts() const {
  const ServerState &s = impl_->state;
  std::lock_guard<std::mutex> lock(s.mutex);
  ConnectionCounts c = s.counts;
  c.open = int64_t(s.open.size());
  for (auto &[raw, weak] : s.open)
    if (auto conn = weak.lock(); conn && conn->idle())
      ++c.idle;
  return c;
}

bool Server::Impl::evictIdle() {
  std::shared_ptr<Connection> oldest;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    for (auto &[raw, weak] : state.open) {
      auto c = weak.lock();
      if (c && c->idle() && (!oldest || c->idleSince() < oldest->idleSince()))
        oldest = std::move(c);
    }
    if (!oldest)
      return false;
    state.open.erase(oldest.get());
    ++state.counts.evicted;
  }
  oldest->close();
  return true;
}

asio::awaitable<void> Server::Impl::accept() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(io), kAwait);
    if (state.stopping)
      co_return;
    if (ec) {
      // Out of descriptors: make room, then accept again.
      if (ec == asio::error::no_descriptors && !evictIdle()) {
        asio::steady_timer pause(io, std::chrono::milliseconds(10));
        co_await pause.async_wait(kAwait);
      }
      continue;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    size_t open;
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      open = state.open.size();
    }
    if (open >= state.options.limits.openConnections && !evictIdle()) {
      {
        std::lock_guard<std::mutex> lock(state.mutex);
        ++state.counts.refused;
      }
      auto executor = socket.get_executor();
      asio::co_spawn(executor,
                     refuse(std::move(socket),
                            state.error(503, "the server has " + std::to_string(open) +
                                                 " connections open, each answering a "
                                                 "request; retry later")),
                     asio::detached);
      continue;
    }
    auto connection = std::make_shared<Connection>(state, std::move(socket));
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      state.open.emplace(connection.get(), connection);
      ++state.counts.accepted;
    }
    connection->start();
  }
}

} // namespace moe::serve::http
