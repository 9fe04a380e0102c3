//===- Generation.cpp - one completion request, answered over time --------===//
#include "serve/openai/Generation.h"

namespace moe::serve {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

/// Nothing written for this long, a stream gets a comment: it keeps
/// proxies from timing out and finds a client that left.
constexpr std::chrono::milliseconds kKeepAlive{500};

/// JSON as UTF-8 text; a byte sequence that is not UTF-8 (a model can
/// generate one) is replaced, never a reason to fail.
std::string dump(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json &j) { return "data: " + dump(j) + "\n\n"; }

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
  case 429: return "busy";
  case 503: return "unavailable";
  case 504: return "timeout";
  default: return "rejected";
  }
}

} // namespace

Generation::Generation(Context context, ApiRequest request)
    : context_(std::move(context)), request_(std::move(request)),
      deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(context_.timeoutSeconds))),
      lastWrite_(Clock::now()) {
  std::vector<rt::GenerationRequest> all = choices(request_);
  choices_.reserve(all.size());
  for (rt::GenerationRequest &r : all) {
    auto text = std::make_unique<StreamText>(*context_.model.tokenizer, r.stop,
                                             context_.model.eosTokens);
    choices_.push_back(Choice{std::move(r), nullptr, std::nullopt, false, std::move(text), 0,
                              LogprobsWriter(*context_.model.tokenizer, request_.chat)});
  }
}

void Generation::Waker::operator()() {
  std::lock_guard<std::mutex> lock(mutex);
  if (wake)
    wake();
}

void Generation::Waker::clear() {
  std::lock_guard<std::mutex> lock(mutex);
  wake = nullptr;
}

Generation::~Generation() {
  waker_->clear();
  cancelAll();
}

void Generation::start(std::function<void()> wake) {
  waker_->wake = std::move(wake);
  rt::EngineService &service = context_.service;
  for (size_t i = 0; i < choices_.size(); ++i)
    service.submit(choices_[i].request, [weak = weak_from_this(), i, waker = waker_,
                                         &service](rt::Submitted s) {
      auto self = weak.lock();
      bool cancel = !self;
      if (self) {
        std::lock_guard<std::mutex> lock(self->mutex_);
        Choice &c = self->choices_[i];
        c.answered = true;
        c.stream = s.stream;
        if (!s.stream)
          c.refused = rejectionError(s);
        cancel = self->abandoned_;
      }
      if (s.stream) {
        if (cancel) // its answer is gone already
          service.cancel(s.stream->id());
        else
          s.stream->setNotify([waker] { (*waker)(); });
      }
      (*waker)();
    });
}

void Generation::cancelAll() {
  std::vector<int64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Choice &c : choices_)
      if (c.stream && !c.result)
        ids.push_back(c.stream->id());
  }
  for (int64_t id : ids)
    context_.service.cancel(id);
}

void Generation::abandon() {
  waker_->clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_ = true;
  }
  cancelAll();
  if (!done_)
    context_.metrics.outcome("disconnected");
}

bool Generation::collect() {
  bool any = false;
  for (Choice &c : choices_) {
    if (!c.stream || c.result)
      continue;
    rt::RequestStream::Update u = c.stream->take();
    if (u.empty())
      continue;
    any = true;
    c.text->add(u.tokens);
    c.entries.insert(c.entries.end(), u.logprobs.begin(), u.logprobs.end());
    if (u.promptLogprobs)
      c.promptLogprobs = std::move(u.promptLogprobs);
    if (u.result) {
      c.result = std::move(u.result);
      if (c.result->finishReason != rt::FinishReason::Cancelled)
        context_.metrics.finished(*c.result, int64_t(c.request.prompt.size()));
      // The result's entries are final: a stop string's tokens went.
      c.entries = c.result->logprobs;
      if (!c.promptLogprobs)
        c.promptLogprobs = c.result->promptLogprobs;
    }
  }
  return any;
}

std::optional<ApiError> Generation::failure() const {
  if (timedOut_)
    return ApiError{504,
                    "the request ran past the server's --request-timeout of " +
                        std::to_string(int64_t(context_.timeoutSeconds)) +
                        " s; it was cancelled",
                    "timeout", "", "timeout"};
  for (const Choice &c : choices_)
    if (c.result && c.result->finishReason == rt::FinishReason::Cancelled) {
      std::optional<std::string> failed = context_.service.failure();
      return ApiError{503,
                      "the request was cancelled: " +
                          (failed ? "the engine stopped: " + *failed
                                  : std::string("the server is shutting down")),
                      "service_unavailable", "", "cancelled"};
    }
  return std::nullopt;
}

int64_t Generation::promptTokens() const {
  int64_t n = 0;
  for (const rt::GenerationRequest &p : request_.prompts)
    n += int64_t(p.prompt.size());
  return n;
}

int64_t Generation::completionTokens() const {
  int64_t n = 0;
  for (const Choice &c : choices_)
    n += c.result ? int64_t(c.result->tokens.size()) : 0;
  return n;
}

http::Producer::Step Generation::errorStep(const ApiError &e) {
  done_ = true;
  context_.metrics.outcome(outcomeOf(e.status));
  Step s;
  if (headSent_) { // a stream ends with the error as its last event
    s.bytes = sse(e.body()) + "data: [DONE]\n\n";
  } else {
    s.head = Head{e.status, "application/json", {}};
    if (e.status == 429 || e.status == 503)
      s.head->headers.push_back({"Retry-After", "1"});
    s.bytes = dump(e.body());
  }
  s.done = true;
  return s;
}

http::Producer::Step Generation::poll() {
  if (done_)
    return Step{std::nullopt, "", true};
  std::optional<ApiError> refused;
  bool answered = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Choice &c : choices_) {
      answered = answered && c.answered;
      if (c.refused && !refused)
        refused = c.refused;
    }
  }
  if (refused) {
    waker_->clear();
    cancelAll();
    return errorStep(*refused);
  }
  if (!answered)
    return {};
  if (!timedOut_ && Clock::now() > deadline_) {
    timedOut_ = true;
    cancelAll();
  }
  collect();
  Step step = request_.stream ? streamStep() : answer();
  if (step.done)
    waker_->clear(); // the answer is over: the engine has nothing more to say
  return step;
}

std::string Generation::echo(Choice &c) {
  if (c.echoed || !request_.echo)
    return "";
  c.echoed = true;
  const size_t p = size_t(&c - choices_.data()) / size_t(request_.n);
  if (request_.logprobs) {
    c.logprobs.addFirstPromptToken(c.request.prompt.front());
    if (c.promptLogprobs)
      for (const rt::LogprobEntry &e : *c.promptLogprobs)
        c.logprobs.add(e);
  }
  return request_.promptTexts[p];
}

json Generation::logprobsSince(Choice &c, size_t upTo) {
  if (!request_.logprobs)
    return nullptr;
  for (; c.entriesSent < std::min(upTo, c.entries.size()); ++c.entriesSent)
    c.logprobs.add(c.entries[c.entriesSent]);
  return c.logprobs.take();
}

json Generation::chunk(size_t index, const std::string &text, json logprobs,
                       std::optional<rt::FinishReason> reason, bool role) const {
  json choice = {{"index", index}};
  if (request_.chat) {
    json delta = json::object();
    if (role)
      delta["role"] = "assistant";
    if (!text.empty())
      delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = reason ? json(finishReason(*reason)) : json();
  return {{"id", context_.id},
          {"object", request_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", context_.created},
          {"model", context_.model.name},
          {"choices", json::array({choice})}};
}

http::Producer::Step Generation::answer() {
  if (auto e = failure()) {
    cancelAll();
    return errorStep(*e);
  }
  for (const Choice &c : choices_)
    if (!c.result)
      return {};
  done_ = true;
  json list = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice &c = choices_[i];
    const std::string prefix = echo(c);
    c.text->finish(c.result->finishReason);
    json logprobs = logprobsSince(c, c.entries.size());
    json choice = {{"index", i}};
    if (request_.chat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text->released()}};
    else
      choice["text"] = prefix + c.text->released();
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = finishReason(c.result->finishReason);
    list.push_back(std::move(choice));
  }
  json body = {{"id", context_.id},
               {"object", request_.chat ? "chat.completion" : "text_completion"},
               {"created", context_.created},
               {"model", context_.model.name},
               {"choices", list},
               {"usage", usageObject(promptTokens(), completionTokens())}};
  return Step{Head{200, "application/json", {}}, dump(body), true};
}

http::Producer::Step Generation::streamStep() {
  Step s;
  if (!headSent_) {
    s.head = Head{200, "text/event-stream", {{"Cache-Control", "no-cache"}}};
    headSent_ = true;
    if (request_.chat) // the role first, as OpenAI streams it
      for (size_t i = 0; i < choices_.size(); ++i)
        s.bytes += sse(chunk(i, "", nullptr, std::nullopt, /*role=*/true));
  }
  if (auto e = failure()) {
    cancelAll();
    Step end = errorStep(*e);
    s.bytes += end.bytes;
    s.done = true;
    return s;
  }
  bool allFinished = true;
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice &c = choices_[i];
    if (c.finishSent)
      continue;
    if (request_.echo && request_.logprobs && !c.promptLogprobs && !c.result) {
      allFinished = false;
      continue; // the echo, with its logprobs, goes first
    }
    std::string text = echo(c);
    if (c.result)
      c.text->finish(c.result->finishReason);
    text += c.text->released().substr(c.textSent);
    c.textSent = c.text->released().size();
    const size_t upTo = c.result ? c.entries.size() : c.text->tokensReleased();
    json logprobs = logprobsSince(c, upTo);
    const bool someLogprobs = logprobs.is_object() &&
                              (request_.chat ? !logprobs["content"].empty()
                                             : !logprobs["tokens"].empty());
    if (!text.empty() || someLogprobs)
      s.bytes += sse(chunk(i, text, someLogprobs ? logprobs : json(), std::nullopt));
    if (c.result) {
      c.finishSent = true;
      s.bytes += sse(chunk(i, "", nullptr, c.result->finishReason));
    } else {
      allFinished = false;
    }
  }
  if (allFinished) {
    if (request_.includeUsage) {
      json usage = chunk(0, "", nullptr, std::nullopt);
      usage["choices"] = json::array();
      usage["usage"] = usageObject(promptTokens(), completionTokens());
      s.bytes += sse(usage);
    }
    s.bytes += "data: [DONE]\n\n";
    s.done = done_ = true;
  } else if (s.bytes.empty() && Clock::now() - lastWrite_ > kKeepAlive) {
    s.bytes = ": waiting\n\n";
  }
  if (!s.bytes.empty())
    lastWrite_ = Clock::now();
  return s;
}

} // namespace moe::serve
