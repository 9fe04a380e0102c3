//===- Generation.h - one completion request, answered over time -*- C++ -*-===//
//
// The producer of a completions or chat completions answer: it submits the
// request's choices (prompts times n) to the engine without blocking,
// reads their tokens as the engine wakes it, and answers with one JSON
// object or a stream of server-sent events. Refused or cancelled choices
// end the whole answer with an error (the choices already running are
// cancelled); so does --request-timeout. When its client goes, every
// choice is cancelled, which frees their KV blocks.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_OPENAI_GENERATION_H
#define MOE_SERVE_OPENAI_GENERATION_H

#include "moe/runtime/EngineService.h"
#include "moe/serve/Http.h"
#include "moe/serve/Metrics.h"
#include "moe/serve/OpenAi.h"
#include "moe/serve/StreamText.h"

#include <chrono>
#include <mutex>

namespace moe::serve {

class Generation : public http::Producer,
                   public std::enable_shared_from_this<Generation> {
public:
  struct Context {
    rt::EngineService &service;
    const ModelInfo &model;
    Metrics &metrics;
    std::string id; ///< the answer's id (cmpl-..., chatcmpl-...)
    int64_t created = 0;
    double timeoutSeconds = 0; ///< --request-timeout
    /// Held until the answer is over (a --max-connections slot).
    std::shared_ptr<void> slot;
  };
  Generation(Context context, ApiRequest request);
  ~Generation() override;

  void start(std::function<void()> wake) override;
  Step poll() override;
  void abandon() override;

private:
  struct Choice {
    rt::GenerationRequest request;
    std::shared_ptr<rt::RequestStream> stream; ///< once accepted
    std::optional<ApiError> refused;
    bool answered = false; ///< the engine took it or refused it
    std::unique_ptr<StreamText> text;
    size_t textSent = 0; ///< bytes of text->released() streamed
    LogprobsWriter logprobs;
    std::vector<rt::LogprobEntry> entries; ///< generated tokens' logprobs so far
    size_t entriesSent = 0;
    std::optional<std::vector<rt::LogprobEntry>> promptLogprobs;
    bool echoed = false; ///< the echoed prompt went out
    std::optional<rt::GenerationResult> result;
    bool finishSent = false;
  };
  /// Takes what the engine has for each choice; whether anything came.
  bool collect();
  /// Cancels every accepted choice that has not ended.
  void cancelAll();
  /// The error that ends an answer whose choices did not all complete.
  std::optional<ApiError> failure() const;
  Step answer();
  Step streamStep();
  Step errorStep(const ApiError &e);
  /// The echoed prompt of a choice (text, and logprobs when asked) once.
  std::string echo(Choice &c);
  /// The logprobs object of what a choice released since the last call.
  nlohmann::ordered_json logprobsSince(Choice &c, size_t upTo);
  /// A stream chunk of choice `index` (with `role`: the chat's first).
  nlohmann::ordered_json chunk(size_t index, const std::string &text,
                               nlohmann::ordered_json logprobs,
                               std::optional<rt::FinishReason> reason, bool role = false) const;
  int64_t promptTokens() const;
  int64_t completionTokens() const;

  Context context_;
  const ApiRequest request_;
  const std::chrono::steady_clock::time_point deadline_;
  /// Guards what the engine's thread sets: the choices' answered, stream
  /// and refused, and abandoned_.
  std::mutex mutex_;
  std::vector<Choice> choices_;
  /// The connection's wake-up, as the engine's thread calls it: cleared
  /// once the answer is over or abandoned, under its lock, so that no call
  /// from the engine reaches a connection (or its I/O context) after that.
  struct Waker {
    std::mutex mutex;
    std::function<void()> wake;
    void operator()();
    void clear();
  };
  const std::shared_ptr<Waker> waker_ = std::make_shared<Waker>();
  bool headSent_ = false, timedOut_ = false, abandoned_ = false, done_ = false;
  std::chrono::steady_clock::time_point lastWrite_;
};

} // namespace moe::serve

#endif
