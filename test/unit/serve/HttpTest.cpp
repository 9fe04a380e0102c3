//===- HttpTest.cpp - the HTTP layer against raw sockets ------------------===//
//
// Every case speaks bytes over loopback to a real moe::serve::http::Server,
// so that what is checked is what a client (honest or not) sees.
//
//===----------------------------------------------------------------------===//
#include "moe/serve/Http.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

using namespace moe::serve::http;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

/// A client socket with a deadline on every read.
class Client {
public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
  }
  ~Client() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  bool connected() const { return connected_; }
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      bytes.remove_prefix(size_t(n));
    }
    return true;
  }
  void shutdownWrite() { ::shutdown(fd_, SHUT_WR); }
  /// Closes with a reset (unread bytes, or SO_LINGER 0) or a FIN.
  void close(bool reset = false) {
    if (reset) {
      linger l{1, 0};
      ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(fd_);
    fd_ = -1;
  }
  /// Reads until `pred(received)` holds, the peer closes, or the deadline.
  template <typename Pred> bool readUntil(Pred pred, std::chrono::milliseconds timeout = 5s) {
    auto deadline = Clock::now() + timeout;
    while (!pred(in_)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0)
        return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, int(left.count())) <= 0)
        return false;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        return pred(in_);
      }
      in_.append(buf, size_t(n));
    }
    return true;
  }
  /// Everything until the peer closes.
  std::string readAll(std::chrono::milliseconds timeout = 5s) {
    readUntil([&](const std::string &) { return closed_; }, timeout);
    return in_;
  }
  /// The next whole response (Content-Length, chunked or close-delimited);
  /// empty when none came. Interim 1xx responses are skipped, as clients do.
  std::string response(std::chrono::milliseconds timeout = 5s) {
    for (;;) {
      size_t end = std::string::npos;
      bool whole = readUntil(
          [&](const std::string &in) {
            size_t h = in.find("\r\n\r\n");
            if (h == std::string::npos)
              return false;
            std::string head = in.substr(0, h);
            if (head.rfind("HTTP/1.1 1", 0) == 0) {
              end = h + 4;
              return true;
            }
            if (size_t cl = head.find("Content-Length: "); cl != std::string::npos) {
              size_t len = std::stoul(head.substr(cl + 16));
              end = h + 4 + len;
              return in.size() >= end;
            }
            if (head.find("Transfer-Encoding: chunked") != std::string::npos) {
              size_t last = in.find("\r\n0\r\n\r\n", h);
              end = last == std::string::npos ? last : last + 7;
              return last != std::string::npos;
            }
            end = std::string::npos; // ends with the connection
            return closed_;
          },
          timeout);
      if (!whole)
        return "";
      std::string r = end == std::string::npos ? in_ : in_.substr(0, end);
      in_.erase(0, r.size());
      if (r.rfind("HTTP/1.1 1", 0) == 0) {
        interim_ += r;
        continue;
      }
      return r;
    }
  }
  bool peerClosed(std::chrono::milliseconds timeout = 5s) {
    readUntil([&](const std::string &) { return closed_; }, timeout);
    return closed_;
  }
  const std::string &interim() const { return interim_; }
  int fd() const { return fd_; }

private:
  int fd_ = -1;
  bool connected_ = false, closed_ = false;
  std::string in_, interim_;
};

std::string body(const std::string &response) {
  size_t h = response.find("\r\n\r\n");
  return h == std::string::npos ? "" : response.substr(h + 4);
}

/// Test-controlled producer: bytes are pushed from the test's thread.
class Feed : public Producer {
public:
  void start(std::function<void()> wake) override {
    std::lock_guard<std::mutex> lock(mutex);
    this->wake = std::move(wake);
    started = true;
    cv.notify_all();
  }
  Step poll() override {
    std::lock_guard<std::mutex> lock(mutex);
    Step s;
    if (!headSent && (withHead || done)) {
      s.head = Head{200, "text/plain", {}};
      headSent = true;
    }
    s.bytes.swap(pending);
    s.done = done;
    return s;
  }
  void abandon() override {
    std::lock_guard<std::mutex> lock(mutex);
    abandoned = true;
    cv.notify_all();
  }
  void push(const std::string &bytes, bool last = false) {
    std::function<void()> w;
    {
      std::lock_guard<std::mutex> lock(mutex);
      pending += bytes;
      done = last;
      withHead = true;
      w = wake;
    }
    if (w)
      w();
  }
  void finish(const std::string &whole) {
    std::function<void()> w;
    {
      std::lock_guard<std::mutex> lock(mutex);
      pending = whole;
      done = true;
      w = wake;
    }
    if (w)
      w();
  }
  bool waitStarted() {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, 5s, [&] { return started; });
  }
  bool waitAbandoned(std::chrono::milliseconds t = 5s) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, t, [&] { return abandoned; });
  }
  bool isAbandoned() {
    std::lock_guard<std::mutex> lock(mutex);
    return abandoned;
  }

  std::mutex mutex;
  std::condition_variable cv;
  std::function<void()> wake;
  std::string pending;
  bool started = false, done = false, headSent = false, withHead = false, abandoned = false;
};

class HttpTest : public ::testing::Test {
protected:
  /// Starts a server with `limits` and the test routes.
  void start(Limits limits = {}, int workers = 2) {
    Options o;
    o.port = 0;
    o.limits = limits;
    o.workers = workers;
    o.authorize = [](const Request &r) { return r.header("Authorization") == "Bearer k"; };
    o.error = [](int status, const std::string &m) {
      return Response{status, "text/plain", {}, "error " + std::to_string(status) + ": " + m};
    };
    std::vector<Route> routes;
    routes.push_back({"GET", "/hello", [](const Request &) {
                        return Reply(Response{200, "text/plain", {}, "hello"});
                      }, false, false, true});
    routes.push_back({"POST", "/echo", [](const Request &r) {
                        return Reply(Response{200, "text/plain", {}, r.body});
                      }});
    routes.push_back({"POST", "/secret", [](const Request &) {
                        return Reply(Response{200, "text/plain", {}, "in"});
                      }, false, true});
    routes.push_back({"GET", "/items/", [](const Request &r) {
                        return Reply(Response{200, "text/plain", {}, r.path.substr(7)});
                      }, true});
    routes.push_back({"POST", "/feed", [this](const Request &) {
                        auto f = std::make_shared<Feed>();
                        {
                          std::lock_guard<std::mutex> lock(feedsMutex);
                          feeds.push_back(f);
                        }
                        feedsCv.notify_all();
                        return Reply(std::shared_ptr<Producer>(f));
                      }});
    server = std::make_unique<Server>(o, routes);
    ASSERT_TRUE(bool(server->bind()));
    thread = std::thread([this] { server->run(); });
  }
  void TearDown() override {
    if (server) {
      server->stop();
      thread.join();
    }
  }
  /// The n-th producer started (0-based), waiting for it.
  std::shared_ptr<Feed> feed(size_t n) {
    std::unique_lock<std::mutex> lock(feedsMutex);
    feedsCv.wait_for(lock, 5s, [&] { return feeds.size() > n; });
    return feeds.size() > n ? feeds[n] : nullptr;
  }
  std::string get(const std::string &path) {
    Client c(server->port());
    c.send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
    return c.response();
  }

  std::unique_ptr<Server> server;
  std::thread thread;
  std::mutex feedsMutex;
  std::condition_variable feedsCv;
  std::vector<std::shared_ptr<Feed>> feeds;
};

std::string post(const std::string &path, const std::string &body,
                 const std::string &extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

} // namespace

TEST_F(HttpTest, RoutesAnswerAndUnknownOnesGet404Or405) {
  start();
  EXPECT_EQ(body(get("/hello")), "hello");
  EXPECT_EQ(body(get("/items/abc")), "abc");
  std::string r = get("/nothing");
  EXPECT_EQ(r.rfind("HTTP/1.1 404", 0), 0u) << r;
  Client c(server->port());
  c.send(post("/hello", "x"));
  r = c.response();
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r;
  EXPECT_NE(r.find("Allow: GET"), std::string::npos) << r;
  // The connection goes on after a 405.
  c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body(c.response()), "hello");
}

TEST_F(HttpTest, HeadersBeyondTheirLimitsAre431AndTheConnectionCloses) {
  Limits l;
  l.headerBytes = 4096;
  l.headerFields = 10;
  start(l);
  {
    // A million header lines: refused at the first 4 KiB, not read whole.
    Client c(server->port());
    c.send("GET /hello HTTP/1.1\r\n");
    std::string lines;
    for (int i = 0; i < 1000; ++i)
      lines += "X-A: " + std::to_string(i) + "\r\n";
    auto t0 = Clock::now();
    for (int i = 0; i < 1000 && c.send(lines); ++i) {
    }
    std::string r = c.response();
    EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r;
    EXPECT_LT(Clock::now() - t0, 5s);
  }
  {
    Client c(server->port());
    std::string req = "GET /hello HTTP/1.1\r\n";
    for (int i = 0; i < 11; ++i)
      req += "X-A: 1\r\n";
    c.send(req + "\r\n");
    std::string r = c.response();
    EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r;
    EXPECT_NE(r.find("11 header fields"), std::string::npos) << r;
    EXPECT_TRUE(c.peerClosed());
  }
  EXPECT_EQ(body(get("/hello")), "hello");
}

TEST_F(HttpTest, BodiesBeyondTheLimitAre413ChunkedOrNot) {
  Limits l;
  l.bodyBytes = 1000;
  start(l);
  {
    // Content-Length beyond the limit: refused from the headers alone.
    Client c(server->port());
    c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n");
    std::string r = c.response();
    EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  }
  {
    // Chunked: counted as the chunks come, refused past the limit.
    Client c(server->port());
    c.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    std::string chunk = "100\r\n" + std::string(256, 'a') + "\r\n";
    std::string r;
    for (int i = 0; i < 400000 && r.empty(); ++i) {
      if (!c.send(chunk))
        break;
      if (i % 64 == 0)
        r = c.response(10ms);
    }
    if (r.empty())
      r = c.response();
    EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  }
  {
    // Within the limit, chunked bodies arrive whole.
    Client c(server->port());
    c.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
           "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    EXPECT_EQ(body(c.response()), "hello world");
  }
}

TEST_F(HttpTest, ExpectContinueIsAnsweredOnlyWithinTheLimit) {
  Limits l;
  l.bodyBytes = 1000;
  start(l);
  {
    Client c(server->port());
    c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\nExpect: "
           "100-continue\r\n\r\n");
    std::string r = c.response();
    EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
    EXPECT_EQ(c.interim(), "");
  }
  {
    Client c(server->port());
    c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
    ASSERT_TRUE(c.readUntil([](const std::string &in) { return in.find("\r\n\r\n") != std::string::npos; }));
    c.send("ok");
    std::string r = c.response();
    EXPECT_EQ(c.interim(), "HTTP/1.1 100 Continue\r\n\r\n");
    EXPECT_EQ(body(r), "ok");
  }
}

TEST_F(HttpTest, TheKeyIsAskedBeforeTheBodyIsRead) {
  Limits l;
  l.bodyBytes = 1000;
  start(l);
  Client c(server->port());
  // The body is announced but never sent: the 401 comes from the headers.
  c.send("POST /secret HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n");
  std::string r = c.response();
  EXPECT_EQ(r.rfind("HTTP/1.1 401", 0), 0u) << r;
  Client d(server->port());
  d.send(post("/secret", "1234567890", "Authorization: Bearer k\r\n"));
  EXPECT_EQ(body(d.response()), "in");
}

TEST_F(HttpTest, ANulInAHeaderIsRefused) {
  start();
  Client c(server->port());
  c.send(std::string("GET /hello HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\0tail\r\n\r\n", 62));
  std::string r = c.response();
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
}

TEST_F(HttpTest, PipelinedRequestsAreAnsweredInOrder) {
  start();
  Client c(server->port());
  c.send(post("/echo", "one") + "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n" + post("/echo", "three"));
  EXPECT_EQ(body(c.response()), "one");
  EXPECT_EQ(body(c.response()), "hello");
  EXPECT_EQ(body(c.response()), "three");
}

TEST_F(HttpTest, AHalfClosedClientGetsItsAnswers) {
  start();
  Client c(server->port());
  c.send(post("/echo", "a") + post("/echo", "b"));
  c.shutdownWrite();
  EXPECT_EQ(body(c.response()), "a");
  EXPECT_EQ(body(c.response()), "b");
  EXPECT_TRUE(c.peerClosed());
}

TEST_F(HttpTest, AHalfClosedClientGetsAProducedAnswer) {
  start();
  Client c(server->port());
  c.send(post("/feed", ""));
  c.shutdownWrite();
  auto f = feed(0);
  ASSERT_TRUE(f && f->waitStarted());
  std::this_thread::sleep_for(1200ms); // probes go out meanwhile
  EXPECT_FALSE(f->isAbandoned());
  f->finish("late answer");
  std::string r = c.response();
  EXPECT_EQ(body(r), "late answer");
  EXPECT_NE(c.interim().find("100 Continue"), std::string::npos);
}

TEST_F(HttpTest, Http10GetsHttp10AnswersAndNoChunks) {
  start();
  {
    Client c(server->port());
    c.send("GET /hello HTTP/1.0\r\n\r\n");
    std::string r = c.readAll();
    EXPECT_EQ(r.rfind("HTTP/1.0 200", 0), 0u) << r;
    EXPECT_EQ(body(r), "hello");
  }
  {
    Client c(server->port());
    c.send("POST /feed HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    auto f = feed(0);
    ASSERT_TRUE(f && f->waitStarted());
    f->push("data: 1\n\n");
    f->push("data: 2\n\n", true);
    std::string r = c.readAll();
    EXPECT_EQ(r.rfind("HTTP/1.0 200", 0), 0u) << r;
    EXPECT_EQ(r.find("chunked"), std::string::npos) << r;
    EXPECT_EQ(body(r), "data: 1\n\ndata: 2\n\n");
  }
}

TEST_F(HttpTest, AProducerStreamsChunksAsItIsWoken) {
  start();
  Client c(server->port());
  c.send(post("/feed", ""));
  auto f = feed(0);
  ASSERT_TRUE(f && f->waitStarted());
  f->push("first");
  ASSERT_TRUE(c.readUntil([](const std::string &in) { return in.find("first") != std::string::npos; }, 2s));
  f->push("second", true);
  std::string r = c.response();
  EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos) << r;
  EXPECT_NE(r.find("second"), std::string::npos) << r;
  // The connection is kept alive after the last chunk.
  c.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body(c.response()), "hello");
}

TEST_F(HttpTest, AClientThatLeavesAbandonsItsProducer) {
  start();
  {
    // Mid-stream: the next write fails.
    Client c(server->port());
    c.send(post("/feed", ""));
    auto f = feed(0);
    ASSERT_TRUE(f && f->waitStarted());
    f->push("x");
    c.close();
    for (int i = 0; i < 40 && !f->isAbandoned(); ++i) {
      f->push("more");
      std::this_thread::sleep_for(50ms);
    }
    EXPECT_TRUE(f->isAbandoned());
  }
  {
    // Before any byte of the answer (a non-streamed request): found by the
    // probe that follows the client's FIN.
    Client c(server->port());
    c.send(post("/feed", ""));
    auto f = feed(1);
    ASSERT_TRUE(f && f->waitStarted());
    c.close();
    EXPECT_TRUE(f->waitAbandoned(3s));
  }
}

TEST_F(HttpTest, SlowHeadersTimeOutAndNeverBlockOthers) {
  Limits l;
  l.headerTime = 600ms;
  start(l);
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<Client>(server->port()));
    slow.back()->send("GET /hel");
  }
  auto t0 = Clock::now();
  EXPECT_EQ(body(get("/hello")), "hello");
  EXPECT_LT(Clock::now() - t0, 1s);
  for (auto &c : slow)
    c->send("l");
  // The header time runs from the first byte: dripping does not extend it.
  for (auto &c : slow)
    EXPECT_TRUE(c->peerClosed(3s));
  // Counted as each coroutine resumes, just after its socket closed.
  for (int i = 0; i < 100 && server->counts().timedOut < 200; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server->counts().timedOut, 200u);
}

TEST_F(HttpTest, AtTheConnectionLimitTheLongestIdleConnectionMakesRoom) {
  Limits l;
  l.openConnections = 4;
  start(l);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<Client>(server->port()));
    idle.back()->send("G");
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(body(get("/hello")), "hello");
  EXPECT_TRUE(idle[0]->peerClosed(2s)); // the oldest went
  EXPECT_GE(server->counts().evicted, 1u);
}

TEST_F(HttpTest, AtTheConnectionLimitWithEveryConnectionBusyANewOneGets503) {
  Limits l;
  l.openConnections = 2;
  start(l);
  Client a(server->port()), b(server->port());
  a.send(post("/feed", ""));
  b.send(post("/feed", ""));
  ASSERT_TRUE(feed(1));
  Client c(server->port());
  std::string r = c.response();
  EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
  // The workers may have started the two producers in either order.
  feed(0)->finish("x");
  feed(1)->finish("y");
  std::set<std::string> answers = {body(a.response()), body(b.response())};
  EXPECT_EQ(answers, (std::set<std::string>{"x", "y"}));
}

TEST_F(HttpTest, ASecondServerOnAPortInUseIsRefused) {
  start();
  Options o;
  o.port = server->port();
  Server second(o, {});
  moe::rt::Status st = second.bind();
  ASSERT_FALSE(bool(st));
  EXPECT_NE(st.message().find("in use"), std::string::npos) << st.message();
}

TEST_F(HttpTest, StopEndsRunWhileConnectionsDripAndProducersWait) {
  start();
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(std::make_unique<Client>(server->port()));
    slow.back()->send("GET /");
  }
  Client c(server->port());
  c.send(post("/feed", ""));
  auto f = feed(0);
  ASSERT_TRUE(f && f->waitStarted());
  auto t0 = Clock::now();
  server->stop();
  thread.join();
  server.reset();
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_TRUE(f->isAbandoned());
}
