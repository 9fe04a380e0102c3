//===- Server.cpp - the OpenAI-compatible HTTP front of the engine --------===//
#include "moe/serve/Server.h"

#include "serve/openai/Generation.h"

#include <cstdio>
#include <ctime>
#include <random>
#include <thread>

namespace moe::serve {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string dump(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

http::Response reply(int status, const json &body) {
  return http::Response{status, "application/json", {}, dump(body)};
}

http::Response replyError(const ApiError &e) {
  http::Response r = reply(e.status, e.body());
  if (e.status == 429 || e.status == 503)
    r.headers.push_back({"Retry-After", "1"});
  return r;
}

/// OpenAI's error body for what the HTTP layer answers itself.
ApiError layerError(int status, const std::string &message) {
  switch (status) {
  case 401:
    return {401, message + ": send \"Authorization: Bearer KEY\"", "invalid_request_error", "",
            "invalid_api_key"};
  case 404:
    return {404, message, "invalid_request_error", "", "not_found"};
  case 405:
    return {405, message, "invalid_request_error", "", "method_not_allowed"};
  case 413:
    return {413, message + " (--max-body)", "invalid_request_error", "", "body_too_large"};
  case 431:
    return {431, message, "invalid_request_error", "", "headers_too_large"};
  case 503:
    return {503, message, "service_unavailable", "", "too_many_connections"};
  case 500:
    return {500, message, "server_error", "", ""};
  default:
    return {status, message, "invalid_request_error", "", ""};
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

} // namespace

/// One of --max-connections, held while a generation request runs.
struct Server::Slot {
  explicit Slot(Server &s) : server(s) {}
  ~Slot() { server.metrics_.connections(--server.active_); }
  Server &server;
};

Server::Server(rt::EngineService &service, ModelInfo model, Metrics &metrics,
               ServeOptions options, std::function<Readiness()> readiness,
               std::function<void(const std::string &)> log)
    : service_(service), model_(std::move(model)), metrics_(metrics),
      options_(std::move(options)), readiness_(std::move(readiness)), log_(std::move(log)),
      ids_(std::random_device()()) {
  http::Options o;
  o.host = options_.host;
  o.port = options_.port;
  o.limits = options_.limits;
  o.workers = options_.workers;
  if (options_.apiKeys)
    o.authorize = [this](const http::Request &r) {
      return options_.apiKeys->accepts(r.header("Authorization"));
    };
  o.error = [](int status, const std::string &message) {
    return replyError(layerError(status, message));
  };
  o.rejected = [this](int status) { metrics_.outcome(outcomeOf(status)); };
  http_ = std::make_unique<http::Server>(std::move(o), routes());
}

Server::~Server() = default;

rt::Status Server::bind() { return http_->bind(); }
int Server::port() const { return http_->port(); }
void Server::run() { http_->run(); }
void Server::stop() { http_->stop(); }

bool Server::waitAnswered(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (active_ > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return active_ == 0;
}

std::shared_ptr<Server::Slot> Server::takeSlot() {
  if (++active_ > options_.maxConnections) {
    --active_;
    return nullptr;
  }
  metrics_.connections(active_);
  return std::make_shared<Slot>(*this);
}

std::string Server::newId(const char *prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  char hex[25];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", (unsigned long long)ids_(),
                (unsigned long long)(ids_() >> 32));
  return std::string(prefix) + hex;
}

void Server::noteIgnored(const std::vector<std::string> &fields) {
  for (const std::string &f : fields) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ignored_.insert(f).second)
        continue;
    }
    log_("accepted and ignored the request field \"" + f +
         "\": it cannot change the answer here (said once)");
  }
}

http::Response Server::health() {
  if (auto failure = service_.failure())
    return reply(503, {{"status", "failed"}, {"error", *failure}});
  Readiness r = readiness_();
  if (r.state == Readiness::State::Failed)
    return reply(503, {{"status", "corrupt"}, {"error", r.detail}});
  if (r.state == Readiness::State::Loading)
    return reply(503, {{"status", "loading"},
                       {"detail", r.detail},
                       {"verified_bytes", r.verifiedBytes},
                       {"total_bytes", r.totalBytes}});
  const bool draining = service_.snapshot().draining;
  return reply(draining ? 503 : 200, {{"status", draining ? "draining" : "ok"}});
}

http::Reply Server::generate(bool chat, const http::Request &request) {
  auto fail = [&](const ApiError &e) {
    metrics_.outcome(outcomeOf(e.status));
    return http::Reply(replyError(e));
  };
  Readiness ready = readiness_();
  if (ready.state != Readiness::State::Ready)
    return fail({503,
                 ready.state == Readiness::State::Loading
                     ? "the weights are still being verified (" + ready.detail +
                           "); retry when /health says ok"
                     : "the weights failed their check and are not served: " + ready.detail,
                 "service_unavailable", "", "not_ready"});
  std::shared_ptr<Slot> slot = takeSlot();
  if (!slot)
    return fail({503, "the server is at its --max-connections of " +
                          std::to_string(options_.maxConnections) + " requests; retry later",
                 "service_unavailable", "", "too_many_connections"});
  ApiRequest r;
  if (auto e = parseRequest(request.body, chat, model_, r))
    return fail(*e);
  noteIgnored(r.ignored);
  Generation::Context context{service_,
                              model_,
                              metrics_,
                              newId(chat ? "chatcmpl-" : "cmpl-"),
                              int64_t(std::time(nullptr)),
                              options_.requestTimeout,
                              slot};
  return http::Reply(std::make_shared<Generation>(std::move(context), std::move(r)));
}

http::Response Server::tokenize(const http::Request &request) {
  json body;
  if (auto e = parseJsonBody(request.body, body))
    return replyError(*e);
  std::vector<int32_t> ids;
  auto special = body.find("add_special_tokens");
  if (special != body.end() && !special->is_boolean())
    return replyError({400, "\"add_special_tokens\" must be true or false", "invalid_request_error",
                       "add_special_tokens", ""});
  if (auto p = body.find("prompt"); p != body.end() && p->is_string()) {
    ids = model_.tokenizer->encode(p->get<std::string>(),
                                   special == body.end() || special->get<bool>());
  } else if (body.contains("messages")) {
    ApiRequest parsed;
    json chat = {{"model", model_.name}, {"messages", body["messages"]}, {"max_tokens", 1}};
    for (const char *key : {"tools", "chat_template_kwargs"})
      if (body.contains(key))
        chat[key] = body[key];
    ModelInfo unlimited = model_;
    unlimited.maxPromptTokens = unlimited.maxContext = INT64_MAX / 2;
    if (auto e = parseRequest(dump(chat), true, unlimited, parsed))
      return replyError(*e);
    ids = parsed.prompts.front().prompt;
  } else {
    return replyError({400, "send \"prompt\" (a string) or \"messages\"", "invalid_request_error",
                       "prompt", ""});
  }
  return reply(200, {{"count", ids.size()}, {"max_model_len", model_.maxContext}, {"tokens", ids}});
}

http::Response Server::detokenize(const http::Request &request) {
  json body;
  if (auto e = parseJsonBody(request.body, body))
    return replyError(*e);
  auto t = body.find("tokens");
  if (t == body.end() || !t->is_array())
    return replyError({400, "\"tokens\" must be a list of token ids", "invalid_request_error",
                       "tokens", ""});
  std::vector<int32_t> ids;
  for (const json &id : *t) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= model_.vocabSize)
      return replyError({400, "token id " + id.dump() + " is outside the vocabulary [0, " +
                                  std::to_string(model_.vocabSize) + ")",
                         "invalid_request_error", "tokens", ""});
    ids.push_back(int32_t(id.get<int64_t>()));
  }
  return reply(200, {{"prompt", model_.tokenizer->decode(ids)}});
}

std::vector<http::Route> Server::routes() {
  const bool key = options_.apiKeys.has_value();
  auto models = [this] {
    return json{{"id", model_.name},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "moe-serve"},
                {"max_model_len", model_.maxContext}};
  };
  std::vector<http::Route> r;
  r.push_back({"GET", "/health", [this](const http::Request &) { return health(); }, false,
               false, true});
  r.push_back({"GET", "/metrics",
               [this](const http::Request &) {
                 return http::Response{200, "text/plain; version=0.0.4", {},
                                       metrics_.text(service_.snapshot(), http_->counts())};
               },
               false, false, true});
  r.push_back({"GET", "/v1/models",
               [models](const http::Request &) {
                 return reply(200, {{"object", "list"}, {"data", json::array({models()})}});
               },
               false, key, true});
  r.push_back({"GET", "/v1/models/",
               [this, models](const http::Request &req) {
                 const std::string id = req.path.substr(std::string("/v1/models/").size());
                 if (id != model_.name)
                   return replyError({404, "the model \"" + id + "\" does not exist; this "
                                           "server serves \"" + model_.name + "\"",
                                      "invalid_request_error", "model", "model_not_found"});
                 return reply(200, models());
               },
               true, key, true});
  for (bool chat : {false, true})
    r.push_back({"POST", chat ? "/v1/chat/completions" : "/v1/completions",
                 [this, chat](const http::Request &req) { return generate(chat, req); }, false,
                 key});
  r.push_back({"POST", "/tokenize",
               [this](const http::Request &req) { return tokenize(req); }, false, key});
  r.push_back({"POST", "/detokenize",
               [this](const http::Request &req) { return detokenize(req); }, false, key});
  r.push_back({"GET", "/tokenizer_info",
               [this](const http::Request &) {
                 auto orNull = [](const std::string &s) { return s.empty() ? json() : json(s); };
                 return reply(200, {{"tokenizer_class", "moe-serve"},
                                    {"bos_token", orNull(model_.bosToken)},
                                    {"eos_token", orNull(model_.eosToken)},
                                    {"pad_token", nullptr},
                                    {"chat_template", orNull(model_.chatTemplateText)},
                                    {"model_max_length", model_.maxContext}});
               },
               false, key, true});
  return r;
}

} // namespace moe::serve
