//===- EngineService.h - the serving engine on its own thread ---*- C++ -*-===//
//
// An Engine is single-threaded; a server has threads of its own. The
// service owns the engine on a thread of its own that steps it while there
// is work; other threads submit, read each request's tokens as they are
// sampled, and cancel, through this thread-safe interface. Submissions and
// cancellations are handed over between steps, so a blocking call waits at
// most one step; an asynchronous server's I/O threads use the calls that
// never block (submit with a callback, RequestStream::setNotify and take).
//
// Under mpirun the service runs on rank 0 with the job's collective: before
// each step it sends the other ranks what it hands its engine
// (ServiceEvents.h), and they run followService, which applies the same to
// theirs. When the plan's ranks step in lockstep (--ep, --tp) every rank
// runs every request; when they hold different tokens (--dp-attention)
// rank 0 gives each request to the rank with the fewest tokens to come,
// every rank steps with the others (its own requests, or a joined step),
// and after each step rank 0 gathers what the others' engines gave their
// requests for its streams.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_ENGINESERVICE_H
#define MOE_RUNTIME_ENGINESERVICE_H

#include "moe/runtime/Engine.h"
#include "moe/runtime/ServiceEvents.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace moe::rt {

/// One request's tokens as the engine samples them. A stop string's tokens
/// arrive before the result that cuts them: hold back text that could
/// start one (StopOptions::strings) until the result comes.
class RequestStream {
public:
  struct Update {
    std::vector<int32_t> tokens;              ///< sampled since the last call
    /// With GenerationRequest::logprobs: one entry per token of `tokens`.
    std::vector<LogprobEntry> logprobs;
    /// Set once, with GenerationRequest::promptLogprobs, when the prefill
    /// is done (before the first token): GenerationResult::promptLogprobs.
    std::optional<std::vector<LogprobEntry>> promptLogprobs;
    std::optional<GenerationResult> result;   ///< set once: the request ended
    bool empty() const { return tokens.empty() && !promptLogprobs && !result; }
  };
  int64_t id() const { return id_; }
  /// What came since the last call; waits up to `timeout` for something.
  Update next(std::chrono::milliseconds timeout);
  /// What came since the last call, at once (maybe nothing).
  Update take() { return next(std::chrono::milliseconds(0)); }
  /// `notify` runs, with no lock held, each time something becomes pending
  /// for this stream (once per engine step): on the engine's thread, or at
  /// once on this thread if something is pending already. It should only
  /// schedule a take(). Null stops the calls, but one already under way on
  /// the engine's thread may still finish after this returns: what it
  /// touches must outlive it (capture it by shared or weak pointer).
  void setNotify(std::function<void()> notify);

private:
  friend class EngineService;
  /// Something became pending: wakes next() and calls the notify hook.
  void wake();
  int64_t id_ = -1;
  std::mutex mutex_;
  std::condition_variable ready_;
  Update pending_;
  std::shared_ptr<const std::function<void()>> notify_;
};

/// Why a submission was refused, for the caller to answer in kind.
enum class Rejection {
  None,
  Busy,        ///< the waiting queue is full: retry later
  Invalid,     ///< the request can never run (too long, bad token id, ...)
  Unavailable, ///< the service is draining, or its engine failed
};

struct Submitted {
  std::shared_ptr<RequestStream> stream; ///< null when rejected
  Rejection rejection = Rejection::None;
  std::string reason;
};

/// What the engine holds now, published after every step.
struct ServiceSnapshot {
  EngineLoad load;
  EngineStats stats;
  /// Token selections per (layer, expert) so far; with several ranks, summed
  /// over them as of their last report.
  std::vector<ExpertLoad> experts;
  int64_t kvBytesPerBlock = 0;
  bool draining = false;
  /// With several ranks: each one's figures as of their last report (once
  /// every kServiceHeartbeat); empty on one rank.
  std::vector<RankFigures> ranks;
  /// Ranks holding different tokens: the requests the other ranks' engines
  /// have not finished (`load` is rank 0's engine's).
  int64_t elsewhere = 0;
};

/// The job a service's engine steps with: the collective of a multi-rank
/// plan and the device its events are staged through; none: one rank.
struct ServiceRanks {
  Collective *ranks = nullptr;
  Device *device = nullptr;
};

class EngineService {
public:
  /// Starts the engine's thread (on rank 0 of `ranks`, which must have
  /// created `engine` with them).
  explicit EngineService(std::unique_ptr<Engine> engine, ServiceRanks ranks = {});
  /// Cancels what is pending and joins the thread.
  ~EngineService();

  /// Queues `request`: a stream of its tokens, or why it was rejected
  /// (Engine::submit's reasons, or that the service is draining). Waits for
  /// the engine's thread to take it (at most one step).
  Submitted submit(GenerationRequest request);
  /// The same without waiting: `done` runs once with the outcome, on the
  /// engine's thread when it takes the request (no lock held; it must not
  /// block), or at once on this thread when the service is draining or its
  /// engine failed.
  void submit(GenerationRequest request, std::function<void(Submitted)> done);
  /// Ends a request early (a client went away); its stream gets a result
  /// with FinishReason::Cancelled. Unknown or finished ids are ignored.
  void cancel(int64_t id);
  ServiceSnapshot snapshot() const;
  /// Stops admitting requests, waits up to `grace` for the pending ones to
  /// finish, then cancels the rest. Returns the ids it cancelled.
  std::vector<int64_t> drain(std::chrono::milliseconds grace);
  /// The error that stopped the engine's thread, if one did (every pending
  /// request then ends cancelled, and submissions are refused).
  std::optional<std::string> failure() const;
  /// The job is ending (another rank failed): without waiting for the
  /// engine's thread, which may be stuck in a collective, every pending
  /// request ends cancelled with failure() = `reason`. The thread is then
  /// never joined: the process must leave (std::_Exit) instead of
  /// destroying the service.
  void abort(const std::string &reason);

private:
  struct Submission {
    GenerationRequest request;
    std::function<void(Submitted)> done;
  };
  /// The engine thread: steps while there is work, sleeps otherwise.
  void run();
  /// On the engine thread: hands over submissions and cancellations (and,
  /// with several ranks, sends them to the others first).
  Status takeInbox();
  /// The same for the other ranks: that the service stops.
  void stopRanks();
  /// Cancels every pending request; their ids.
  std::vector<int64_t> cancelPending();
  /// Ranks holding different tokens: submissions checked and given to a
  /// rank before they are shared (takeInbox).
  Status takeInboxAcrossRanks(std::deque<Submission> &submissions,
                              std::vector<int64_t> &cancels, bool cancelAll);
  /// This step's prompt log-probabilities, sampled tokens and results, as
  /// the streams name their requests (gathered from every rank when they
  /// hold different tokens).
  Expected<std::vector<ServiceOutputs>> collect();
  /// Them to their streams.
  void deliver(std::vector<ServiceOutputs> outputs);
  /// A new snapshot; wakes drain().
  void publish();
  /// failure() becomes `message` unless something failed first.
  void recordFailure(const std::string &message);

  std::unique_ptr<Engine> engine_;
  ServiceRanks ranks_;
  /// Ranks holding different tokens: where each request runs.
  struct Placement;
  std::unique_ptr<Placement> placement_;
  /// With several ranks: whether this step's events ask for a report, when
  /// the last was asked for, and what it said.
  bool reportDue_ = false;
  std::chrono::steady_clock::time_point lastReport_{};
  std::optional<JobFigures> figures_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, handed_;
  std::deque<Submission> submissions_;
  /// With other ranks: the submissions being sent to them (abort() answers
  /// them if that never ends).
  std::deque<Submission> handing_;
  std::vector<int64_t> cancels_;
  bool stop_ = false, draining_ = false;
  /// Set by drain() when its grace is over: the engine thread cancels what
  /// is pending and reports the ids through it.
  std::function<void(std::vector<int64_t>)> drainCancel_;
  std::optional<std::string> failure_;
  ServiceSnapshot snapshot_;
  /// The streams of pending requests: the engine thread's, and abort()'s.
  std::mutex streamsMutex_;
  std::map<int64_t, std::shared_ptr<RequestStream>> streams_;
  bool aborted_ = false;
  std::thread thread_;
};

/// The other ranks of a service's job: applies rank 0's events to
/// `engine` and steps it with rank 0's, until rank 0's service stops
/// (ok) or a step or collective fails.
Status followService(Engine &engine, Collective &ranks, Device &device);

} // namespace moe::rt

#endif
