//===- Connection.cpp - one client connection of the HTTP server ----------===//
#include "serve/http/Connection.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include <poll.h>

#include <algorithm>
#include <array>
#include <cassert>

namespace moe::serve::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using Clock = std::chrono::steady_clock;
using tcp = asio::ip::tcp;

constexpr auto kAwait = asio::as_tuple(asio::use_awaitable);
/// A half-closed HTTP/1.1 client is asked this often whether it is still
/// there (Connection::clientGone).
constexpr std::chrono::milliseconds kProbeEvery{500};
/// After the last answer, what the client still sends is read and dropped
/// this long before the socket closes: closing with unread bytes would
/// reset the connection and could destroy the answer before it is read.
constexpr std::chrono::milliseconds kLinger{2000};
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

bool matches(const Route &route, const std::string &path) {
  return route.prefix ? path.size() > route.path.size() && path.rfind(route.path, 0) == 0
                      : path == route.path;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(uint8_t(x)) == std::tolower(uint8_t(y));
         });
}

} // namespace

Response ServerState::error(int status, const std::string &message) const {
  Response r = options.error ? options.error(status, message)
                             : Response{status, "text/plain", {}, message + "\n"};
  r.status = status;
  if (options.rejected)
    options.rejected(status);
  return r;
}

Connection::Connection(ServerState &state, tcp::socket socket)
    : state_(state), stream_(std::move(socket)), wake_(stream_.get_executor()) {
  // The header limit bounds what one read may hold; a body is moved out of
  // the buffer into the request as it is parsed.
  buffer_.max_size(state_.options.limits.headerBytes + (64 << 10));
  setIdle(true);
}

std::chrono::steady_clock::time_point Connection::idleSince() const {
  return Clock::time_point(Clock::duration(idleSince_.load()));
}

void Connection::setIdle(bool idle) {
  if (idle)
    idleSince_ = Clock::now().time_since_epoch().count();
  idle_ = idle;
}

void Connection::start() {
  auto self = shared_from_this();
  asio::co_spawn(stream_.get_executor(), run(), [self](std::exception_ptr) {
    std::lock_guard<std::mutex> lock(self->state_.mutex);
    self->state_.open.erase(self.get());
  });
}

void Connection::close() {
  closing_ = true;
  asio::post(stream_.get_executor(), [self = shared_from_this()] {
    self->wake_.cancel();
    self->stream_.close();
  });
}

asio::awaitable<void> Connection::run() {
  bool served = false;
  for (;;) {
    Request request;
    const Route *route = nullptr;
    bool keepAlive = false;
    if (!co_await read(request, route, keepAlive, served))
      break;
    served = true;
    if (!route)
      continue; // answered by the layer (404, 405); the connection goes on
    setIdle(false);
    Reply reply = co_await handle(*route, request);
    keepAlive = keepAlive && !closing_ && !state_.stopping;
    // No co_await in a conditional expression, nor on temporaries: GCC 12
    // miscompiles some of those (double destruction).
    bool goOn = false;
    if (reply.producer)
      goOn = co_await produce(request, *reply.producer, keepAlive);
    else
      goOn = co_await write(request, *reply.response, keepAlive);
    if (!goOn || !keepAlive)
      break;
    setIdle(true);
  }
  co_await linger();
}

asio::awaitable<void> Connection::linger() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (!ec && !closing_ && !state_.stopping) {
    stream_.expires_after(kLinger);
    std::array<char, 4096> sink;
    for (;;) {
      auto [rec, n] = co_await stream_.async_read_some(asio::buffer(sink), kAwait);
      if (rec)
        break;
    }
  }
  stream_.close();
}

asio::awaitable<bool> Connection::read(Request &request, const Route *&route, bool &keepAlive,
                                       bool served) {
  const Limits &limits = state_.options.limits;
  setIdle(true);
  // A kept-alive connection waits idleTime for its next request to start;
  // the header time runs from its first byte.
  if (served && buffer_.size() == 0) {
    stream_.expires_after(limits.idleTime);
    auto [ec, n] = co_await stream_.async_read_some(buffer_.prepare(4096), kAwait);
    if (ec)
      co_return false;
    buffer_.commit(n);
  }
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(uint32_t(std::min<size_t>(limits.headerBytes, UINT32_MAX)));
  parser.body_limit(limits.bodyBytes);
  stream_.expires_after(limits.headerTime);
  auto [ec, n] = co_await bhttp::async_read_header(stream_, buffer_, parser, kAwait);
  const unsigned version = parser.is_header_done() && parser.get().version() == 10 ? 10 : 11;
  if (ec == bhttp::error::body_limit) {
    co_await fail(version, 413, "the request body of " +
                                    std::to_string(parser.content_length().value_or(0)) +
                                    " bytes exceeds the limit of " +
                                    std::to_string(limits.bodyBytes) + " bytes");
    co_return false;
  }
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    co_await fail(version, 431, "the request line and header fields exceed " +
                                    std::to_string(limits.headerBytes) + " bytes");
    co_return false;
  }
  if (ec) {
    if (ec == beast::error::timeout) {
      std::lock_guard<std::mutex> lock(state_.mutex);
      ++state_.counts.timedOut;
    }
    // The client left, the header time passed (the stream is closed), or
    // the bytes are not HTTP.
    if (!closing_ && !state_.stopping && ec != bhttp::error::end_of_stream &&
        ec != asio::error::eof && ec != beast::error::timeout &&
        ec != asio::error::operation_aborted && ec != asio::error::connection_reset)
      co_await fail(version, 400, "malformed request: " + ec.message());
    co_return false;
  }

  const auto &header = parser.get();
  const size_t fields = size_t(std::distance(header.begin(), header.end()));
  if (fields > limits.headerFields) {
    co_await fail(version, 431, "the request has " + std::to_string(fields) +
                                    " header fields; at most " +
                                    std::to_string(limits.headerFields) + " are accepted");
    co_return false;
  }
  request.method = std::string(header.method_string());
  request.target = std::string(header.target());
  request.path = request.target.substr(0, request.target.find('?'));
  request.version = version;
  for (const auto &f : header)
    request.headers.push_back({std::string(f.name_string()), std::string(f.value())});
  keepAlive = header.keep_alive();

  std::string allowed;
  for (const Route &r : state_.routes) {
    if (!matches(r, request.path))
      continue;
    if (r.method == request.method) {
      route = &r;
      break;
    }
    allowed += (allowed.empty() ? "" : ", ") + r.method;
  }
  if (route && route->needsKey && state_.options.authorize &&
      !state_.options.authorize(request)) {
    co_await fail(version, 401, "a valid API key is required");
    co_return false;
  }
  if (route && version == 11 && iequals(request.header("Expect"), "100-continue")) {
    stream_.expires_after(limits.writeTime);
    auto [wec, wn] = co_await asio::async_write(stream_, asio::buffer(kContinue), kAwait);
    if (wec)
      co_return false;
  }
  if (!parser.is_done()) {
    stream_.expires_after(limits.bodyTime);
    auto [bec, bn] = co_await bhttp::async_read(stream_, buffer_, parser, kAwait);
    if (bec == bhttp::error::body_limit) {
      co_await fail(version, 413, "the request body exceeds the limit of " +
                                      std::to_string(limits.bodyBytes) + " bytes");
      co_return false;
    }
    if (bec) {
      if (bec == beast::error::timeout) {
        std::lock_guard<std::mutex> lock(state_.mutex);
        ++state_.counts.timedOut;
      }
      if (!closing_ && !state_.stopping && bec != beast::error::timeout &&
          bec != bhttp::error::partial_message && bec != asio::error::eof &&
          bec != asio::error::operation_aborted && bec != asio::error::connection_reset)
        co_await fail(version, 400, "malformed request body: " + bec.message());
      co_return false;
    }
  }
  request.body = std::move(parser.get().body());
  if (!route) {
    setIdle(false);
    Response r = state_.error(allowed.empty() ? 404 : 405,
                              allowed.empty()
                                  ? "no route " + request.method + " " + request.path
                                  : request.method + " is not allowed on " + request.path +
                                        "; use " + allowed);
    if (!allowed.empty())
      r.headers.push_back({"Allow", allowed});
    if (!co_await write(request, r, keepAlive) || !keepAlive)
      co_return false;
  }
  co_return true;
}

asio::awaitable<void> Connection::fail(unsigned version, int status, std::string message) {
  Request request;
  request.version = version;
  Response response = state_.error(status, message);
  co_await write(request, response, false);
}

asio::awaitable<bool> Connection::write(const Request &request, const Response &response,
                                        bool keepAlive) {
  bhttp::response<bhttp::string_body> res;
  res.result(unsigned(response.status));
  res.version(request.version);
  res.set(bhttp::field::content_type, response.contentType);
  for (const Header &h : response.headers)
    res.insert(h.name, h.value);
  res.body() = response.body;
  res.keep_alive(keepAlive);
  res.prepare_payload();
  stream_.expires_after(state_.options.limits.writeTime);
  auto [ec, n] = co_await bhttp::async_write(stream_, res, kAwait);
  co_return !ec;
}

asio::awaitable<Reply> Connection::handle(const Route &route, const Request &request) {
  auto call = [&]() -> Reply {
    try {
      Reply r = route.handler(request);
      if (r.response || r.producer)
        return r;
      return state_.error(500, "the handler of " + request.path + " gave no answer");
    } catch (const std::exception &e) {
      return state_.error(500, std::string("internal error: ") + e.what());
    }
  };
  if (route.runsInline)
    co_return call();
  co_return co_await asio::co_spawn(
      state_.workers, [&]() -> asio::awaitable<Reply> { co_return call(); },
      asio::use_awaitable);
}

asio::awaitable<bool> Connection::clientGone(const Request &request) {
  pollfd p{stream_.socket().native_handle(), POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0)
    co_return false;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
    co_return true;
  if (!(p.revents & POLLRDHUP) || request.version < 11 ||
      Clock::now() - lastProbe_ < kProbeEvery)
    co_return false;
  lastProbe_ = Clock::now();
  stream_.expires_after(state_.options.limits.writeTime);
  auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(kContinue), kAwait);
  co_return bool(ec);
}

asio::awaitable<bool> Connection::produce(const Request &request, Producer &producer,
                                          bool keepAlive) {
  // Set by wake() from any thread; one post per wake-up at most.
  auto woken = std::make_shared<std::atomic<bool>>(false);
  producer.start([weak = weak_from_this(), woken] {
    if (woken->exchange(true))
      return;
    if (auto c = weak.lock())
      asio::post(c->stream_.get_executor(), [c] { c->wake_.cancel(); });
  });
  const Limits &limits = state_.options.limits;
  bool headSent = false, chunked = false;
  auto abandon = [&] {
    producer.abandon();
    return false;
  };
  for (;;) {
    if (closing_ || state_.stopping)
      co_return abandon();
    woken->store(false);
    Producer::Step step = producer.poll();
    if (step.head && !headSent) {
      if (step.done) {
        Response whole{step.head->status, step.head->contentType, step.head->headers,
                       std::move(step.bytes)};
        co_return co_await write(request, whole, keepAlive);
      }
      bhttp::response<bhttp::empty_body> res;
      res.result(unsigned(step.head->status));
      res.version(request.version);
      res.set(bhttp::field::content_type, step.head->contentType);
      for (const Header &h : step.head->headers)
        res.insert(h.name, h.value);
      // HTTP/1.0 knows no chunks: the body ends with the connection.
      chunked = request.version >= 11;
      keepAlive = keepAlive && chunked;
      res.keep_alive(keepAlive);
      res.chunked(chunked);
      bhttp::response_serializer<bhttp::empty_body> serializer(res);
      stream_.expires_after(limits.writeTime);
      auto [ec, n] = co_await bhttp::async_write_header(stream_, serializer, kAwait);
      if (ec)
        co_return abandon();
      headSent = true;
    }
    if (!headSent && (!step.bytes.empty() || step.done)) {
      // A producer that writes before its head: its own bug, answered so.
      producer.abandon();
      Response error = state_.error(500, "an answer began without a status");
      co_await write(request, error, false);
      co_return false;
    }
    if (!step.bytes.empty()) {
      stream_.expires_after(limits.writeTime);
      boost::system::error_code ec;
      if (chunked) {
        auto chunk = bhttp::make_chunk(asio::buffer(step.bytes));
        std::tie(ec, std::ignore) = co_await asio::async_write(stream_, chunk, kAwait);
      } else {
        std::tie(ec, std::ignore) =
            co_await asio::async_write(stream_, asio::buffer(step.bytes), kAwait);
      }
      if (ec)
        co_return abandon();
    }
    if (step.done) {
      if (chunked) {
        stream_.expires_after(limits.writeTime);
        auto last = bhttp::make_chunk_last();
        auto [ec, n] = co_await asio::async_write(stream_, last, kAwait);
        if (ec)
          co_return false;
      }
      co_return keepAlive;
    }
    if (!headSent) {
      bool gone = co_await clientGone(request);
      if (gone)
        co_return abandon();
    }
    if (!woken->load()) {
      wake_.expires_after(Server::kTick);
      co_await wake_.async_wait(kAwait);
    }
  }
}

} // namespace moe::serve::http
