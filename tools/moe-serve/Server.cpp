//===- Server.cpp - the OpenAI-compatible HTTP front of the engine --------===//
#include "tools/moe-serve/Server.h"
#include "tools/moe-serve/StreamText.h"

#include <httplib.h>

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

namespace moe::serve {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(100);

/// JSON as UTF-8 text; a byte sequence that is not UTF-8 (a model can
/// generate one) is replaced, never a reason to fail.
std::string dump(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply(httplib::Response &res, int status, const json &body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void replyError(httplib::Response &res, const ApiError &e) {
  if (e.status == 429 || e.status == 503)
    res.set_header("Retry-After", "1");
  reply(res, e.status, e.body());
}

ApiError rejectionError(const rt::Submitted &s) {
  switch (s.rejection) {
  case rt::Rejection::Busy:
    return {429, s.reason, "rate_limit_error", "", "queue_full"};
  case rt::Rejection::Unavailable:
    return {503, s.reason, "service_unavailable", "", ""};
  default:
    return {400, s.reason, "invalid_request_error", "", ""};
  }
}

const char *outcomeOf(int status) {
  switch (status) {
  case 401: return "unauthorized";
  case 429: return "busy";
  case 503: return "unavailable";
  case 504: return "timeout";
  default: return "rejected";
  }
}

std::string sse(const json &j) { return "data: " + dump(j) + "\n\n"; }

} // namespace

/// One of --max-connections, held while a generation request runs.
struct Server::Slot {
  explicit Slot(Server &s) : server(s) {}
  ~Slot() { server.metrics_.connections(--server.active_); }
  Server &server;
};

Server::Server(rt::EngineService &service, ModelInfo model, Metrics &metrics,
               ServeOptions options)
    : service_(service), model_(std::move(model)), metrics_(metrics),
      options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  // Threads for every slot, and a few more so that /health, /metrics and
  // the 503s beyond the slots are answered while every slot is busy.
  const size_t threads = size_t(options_.maxConnections) + 8;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.maxBodyBytes);
  // The library listens with a backlog of 5 (compiled in): a burst of new
  // connections beyond it is dropped by the kernel and the clients see
  // resets. Keep the listening socket to listen again with a real backlog.
  http_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listening_ = sock;
  });
  http_->set_keep_alive_timeout(5);
  routes();
}

Server::~Server() = default;

rt::Status Server::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ < 0)
      return rt::Status::error("cannot listen on " + options_.host + ": no free port");
  } else {
    if (!http_->bind_to_port(options_.host, options_.port))
      return rt::Status::error("cannot listen on " + options_.host + ":" +
                               std::to_string(options_.port) +
                               " (in use, or not an address of this machine); pick another "
                               "with --port or --host");
    port_ = options_.port;
  }
  if (::listen(listening_, SOMAXCONN) != 0)
    return rt::Status::error("cannot listen on " + options_.host + ":" + std::to_string(port_) +
                             ": " + std::strerror(errno));
  return rt::Status::ok();
}

void Server::run() { http_->listen_after_bind(); }

bool Server::waitAnswered(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (active_ > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return active_ == 0;
}

void Server::stop() { http_->stop(); }

std::unique_ptr<Server::Slot> Server::takeSlot() {
  if (++active_ > options_.maxConnections) {
    --active_;
    return nullptr;
  }
  metrics_.connections(active_);
  return std::make_unique<Slot>(*this);
}

void Server::routes() {
  http_->set_pre_routing_handler([this](const httplib::Request &req, httplib::Response &res) {
    if (!options_.apiKeys || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    if (options_.apiKeys->accepts(req.get_header_value("Authorization")))
      return httplib::Server::HandlerResponse::Unhandled;
    metrics_.outcome("unauthorized");
    replyError(res, {401, "a valid API key is required: send \"Authorization: Bearer KEY\"",
                     "invalid_request_error", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // 404, 405, 413 (a body over --max-body) with OpenAI's error body.
  http_->set_error_handler([this](const httplib::Request &req, httplib::Response &res) {
    if (!res.body.empty())
      return;
    std::string message =
        res.status == 413 ? "the request body exceeds " + std::to_string(options_.maxBodyBytes) +
                                " bytes (--max-body)"
        : res.status == 404 ? "no route " + req.method + " " + req.path
                            : "HTTP " + std::to_string(res.status);
    metrics_.outcome("rejected");
    res.set_content(dump(ApiError{res.status, message, "invalid_request_error", "", ""}.body()),
                    "application/json");
  });
  http_->Get("/health", [this](const httplib::Request &, httplib::Response &res) {
    rt::ServiceSnapshot s = service_.snapshot();
    if (auto failure = service_.failure())
      return reply(res, 503, {{"status", "failed"}, {"error", *failure}});
    reply(res, s.draining ? 503 : 200, {{"status", s.draining ? "draining" : "ok"}});
  });
  http_->Get("/metrics", [this](const httplib::Request &, httplib::Response &res) {
    res.set_content(metrics_.text(service_.snapshot()), "text/plain; version=0.0.4");
  });
  http_->Get("/v1/models", [this](const httplib::Request &, httplib::Response &res) {
    reply(res, 200,
          {{"object", "list"},
           {"data", json::array({{{"id", model_.name},
                                  {"object", "model"},
                                  {"created", 0},
                                  {"owned_by", "moe-serve"},
                                  {"max_model_len", model_.maxContext}}})}});
  });
  for (bool chat : {false, true})
    http_->Post(chat ? "/v1/chat/completions" : "/v1/completions",
                [this, chat](const httplib::Request &req, httplib::Response &res) {
                  generate(chat, req.body, res);
                });
}

void Server::generate(bool chat, const std::string &body, httplib::Response &res) {
  auto fail = [&](const ApiError &e) {
    metrics_.outcome(outcomeOf(e.status));
    replyError(res, e);
  };
  std::shared_ptr<Slot> slot = takeSlot();
  if (!slot)
    return fail({503, "the server is at its --max-connections of " +
                          std::to_string(options_.maxConnections) + " requests; retry later",
                 "service_unavailable", "", "too_many_connections"});
  ApiRequest r;
  if (auto e = parseRequest(body, chat, model_, r))
    return fail(*e);
  const int64_t promptTokens = int64_t(r.generation.prompt.size());
  const std::vector<std::string> stops = r.generation.stop.strings;
  rt::Submitted sub = service_.submit(r.generation);
  if (!sub.stream)
    return fail(rejectionError(sub));

  const std::string id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(++nextId_);
  const int64_t created = int64_t(std::time(nullptr));
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.requestTimeout));
  const ApiError timeout{504,
                         "the request ran past the server's --request-timeout of " +
                             std::to_string(int64_t(options_.requestTimeout)) + " s; it was "
                             "cancelled",
                         "timeout", "", "timeout"};
  // Cancelled by the server itself (a drain past its grace, or the engine
  // failed): an error, not a short answer.
  auto cancelled = [this] {
    std::optional<std::string> failure = service_.failure();
    return ApiError{503,
                    "the request was cancelled: " +
                        (failure ? "the engine stopped: " + *failure
                                 : std::string("the server is shutting down")),
                    "service_unavailable", "", "cancelled"};
  };
  auto text = std::make_shared<StreamText>(*model_.tokenizer, stops);
  // Waits for the stream's next update, cancelling at the deadline.
  auto next = [this, stream = sub.stream, deadline](bool &timedOut) {
    rt::RequestStream::Update u = stream->next(kPoll);
    if (!u.result && Clock::now() > deadline && !timedOut) {
      timedOut = true;
      service_.cancel(stream->id());
    }
    return u;
  };

  if (!r.stream) {
    bool timedOut = false;
    for (;;) {
      rt::RequestStream::Update u = next(timedOut);
      text->add(u.tokens);
      if (!u.result)
        continue;
      if (timedOut)
        return fail(timeout);
      metrics_.finished(*u.result, promptTokens);
      if (u.result->finishReason == rt::FinishReason::Cancelled)
        return replyError(res, cancelled());
      text->finish(u.result->finishReason);
      return reply(res, 200,
                   responseObject(r, id, created, model_.name, text->released(),
                                  u.result->finishReason, int64_t(u.result->tokens.size())));
    }
  }

  // Server-sent events: one chunk per update, then the usage, then [DONE].
  struct State {
    bool first = true, ended = false, timedOut = false;
  };
  auto state = std::make_shared<State>();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, this](size_t, httplib::DataSink &sink) {
        rt::RequestStream::Update u = next(state->timedOut);
        std::string out;
        std::string piece = text->add(u.tokens);
        if (u.result) {
          state->ended = true;
          if (state->timedOut) {
            metrics_.outcome("timeout");
            out += sse(timeout.body());
          } else if (u.result->finishReason == rt::FinishReason::Cancelled) {
            metrics_.finished(*u.result, promptTokens);
            out += sse(cancelled().body());
          } else {
            metrics_.finished(*u.result, promptTokens);
            piece += text->finish(u.result->finishReason);
            if (!piece.empty() || state->first)
              out += sse(chunkObject(r, id, created, model_.name, piece, std::nullopt,
                                     state->first));
            out += sse(chunkObject(r, id, created, model_.name, "", u.result->finishReason,
                                   false));
            if (r.includeUsage) {
              json usage = chunkObject(r, id, created, model_.name, "", std::nullopt, false);
              usage["choices"] = json::array();
              usage["usage"] = usageObject(promptTokens, int64_t(u.result->tokens.size()));
              out += sse(usage);
            }
          }
          out += "data: [DONE]\n\n";
        } else if (!piece.empty() || state->first) {
          out = sse(chunkObject(r, id, created, model_.name, piece, std::nullopt, state->first));
        } else {
          out = ": waiting\n\n"; // a comment: finds a client that went away
        }
        state->first = false;
        if (!sink.write(out.data(), out.size()))
          return false; // gone: the releaser cancels
        if (state->ended)
          sink.done();
        return true;
      },
      [=, this](bool) {
        (void)slot; // held until the stream is over
        if (!state->ended) {
          metrics_.outcome("disconnected");
          service_.cancel(sub.stream->id());
        }
      });
}

} // namespace moe::serve
