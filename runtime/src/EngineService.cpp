//===- EngineService.cpp - the serving engine on its own thread -----------===//
#include "moe/runtime/EngineService.h"

#include <algorithm>
#include <future>
#include <set>

namespace moe::rt {

RequestStream::Update RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !pending_.empty(); });
  Update out = std::move(pending_);
  pending_ = Update();
  return out;
}

void RequestStream::setNotify(std::function<void()> notify) {
  std::shared_ptr<const std::function<void()>> now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    notify_ = notify ? std::make_shared<const std::function<void()>>(std::move(notify)) : nullptr;
    if (!pending_.empty())
      now = notify_;
  }
  if (now)
    (*now)();
}

void RequestStream::wake() {
  std::shared_ptr<const std::function<void()>> notify;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    notify = notify_;
  }
  ready_.notify_all();
  if (notify)
    (*notify)();
}

EngineService::EngineService(std::unique_ptr<Engine> engine, ServiceRanks ranks)
    : engine_(std::move(engine)), ranks_(ranks) {
  if (!ranks_.ranks || ranks_.ranks->size() == 1)
    ranks_ = {};
  publish();
  thread_ = std::thread([this] { run(); });
}

EngineService::~EngineService() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Submitted EngineService::submit(GenerationRequest request) {
  // Shared with the callback: the engine's thread may still be inside
  // set_value when this thread wakes and returns.
  auto handed = std::make_shared<std::promise<Submitted>>();
  std::future<Submitted> outcome = handed->get_future();
  submit(std::move(request), [handed](Submitted s) { handed->set_value(std::move(s)); });
  return outcome.get();
}

void EngineService::submit(GenerationRequest request, std::function<void(Submitted)> done) {
  std::optional<Submitted> refused;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_)
      refused = Submitted{nullptr, Rejection::Unavailable, "the engine stopped: " + *failure_};
    else if (draining_ || stop_)
      refused = Submitted{nullptr, Rejection::Unavailable,
                          "the server is shutting down; send the request elsewhere"};
    else
      submissions_.push_back({std::move(request), std::move(done)});
  }
  if (refused)
    return done(std::move(*refused));
  wake_.notify_all();
}

void EngineService::cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancels_.push_back(id);
  }
  wake_.notify_all();
}

ServiceSnapshot EngineService::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return snapshot_;
}

std::optional<std::string> EngineService::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void EngineService::abort(const std::string &reason) {
  recordFailure(reason);
  std::deque<Submission> refused;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    refused.swap(submissions_);
    for (Submission &r : handing_)
      refused.push_back(std::move(r));
    handing_.clear();
  }
  std::vector<std::shared_ptr<RequestStream>> ended;
  {
    std::lock_guard<std::mutex> lock(streamsMutex_);
    aborted_ = true;
    for (auto &[id, stream] : streams_) {
      GenerationResult result;
      result.id = id;
      result.finishReason = FinishReason::Cancelled;
      std::lock_guard<std::mutex> streamLock(stream->mutex_);
      stream->pending_.result = std::move(result);
      ended.push_back(stream);
    }
    streams_.clear();
  }
  for (const std::shared_ptr<RequestStream> &stream : ended)
    stream->wake();
  for (Submission &r : refused)
    r.done({nullptr, Rejection::Unavailable, "the engine stopped: " + reason});
  handed_.notify_all();
}

std::vector<int64_t> EngineService::drain(std::chrono::milliseconds grace) {
  auto deadline = std::chrono::steady_clock::now() + grace;
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  snapshot_.draining = true;
  auto empty = [&] {
    const EngineLoad &l = snapshot_.load;
    return submissions_.empty() && l.waiting + l.running + l.swapped == 0;
  };
  handed_.wait_until(lock, deadline, [&] { return empty() || failure_.has_value(); });
  if (empty() || failure_)
    return {};
  // Cancel whatever is still pending, on the engine thread, and wait for it.
  std::vector<int64_t> cancelled;
  bool done = false;
  drainCancel_ = [&](std::vector<int64_t> ids) {
    cancelled = std::move(ids);
    done = true;
  };
  wake_.notify_all();
  handed_.wait(lock, [&] { return done; });
  return cancelled;
}

void EngineService::recordFailure(const std::string &message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_) // abort() may have said why first
    failure_ = message;
}

void EngineService::run() {
  bool failed = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto work = [&] {
        return stop_ || drainCancel_ || !submissions_.empty() || !cancels_.empty() ||
               !engine_->idle();
      };
      // With other ranks, an idle service still sends them (empty) events.
      if (ranks_.ranks)
        wake_.wait_for(lock, kServiceHeartbeat, work);
      else
        wake_.wait(lock, work);
      if (stop_)
        break;
    }
    Status st = takeInbox();
    if (st && !engine_->idle())
      st = engine_->step();
    if (st && reportDue_) {
      auto figures = gatherJobFigures(*ranks_.ranks, *ranks_.device, *engine_);
      if (figures)
        figures_ = figures.take();
      else
        st = figures.status();
    }
    if (!st) {
      recordFailure(st.message());
      failed = true;
      break;
    }
    // The snapshot first: a client that has its result sees its blocks free.
    publish();
    deliver();
  }
  // Stopped, or the engine failed: nothing pending is left waiting (and,
  // stopped, the other ranks stop too).
  if (!failed)
    stopRanks();
  ranks_ = {};
  (void)takeInbox(); // ranks_ is cleared: nothing is shared, nothing can fail
  std::vector<int64_t> ids = cancelPending();
  publish();
  deliver();
  std::lock_guard<std::mutex> lock(mutex_);
  if (drainCancel_)
    std::exchange(drainCancel_, nullptr)(std::move(ids));
  handed_.notify_all();
}

void EngineService::stopRanks() {
  if (!ranks_.ranks)
    return;
  ServiceEvents stop;
  stop.stop = true;
  if (Status st = shareEvents(*ranks_.ranks, *ranks_.device, stop); !st)
    recordFailure(st.message());
}

Status EngineService::takeInbox() {
  std::deque<Submission> submissions;
  std::vector<int64_t> cancels;
  std::function<void(std::vector<int64_t>)> drainCancel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submissions.swap(submissions_);
    cancels.swap(cancels_);
    drainCancel = drainCancel_;
  }
  if (ranks_.ranks) { // the other ranks' engines get the same, in the same order
    ServiceEvents events;
    for (const Submission &r : submissions)
      events.submissions.push_back(r.request);
    events.cancels = cancels;
    events.cancelAll = bool(drainCancel);
    const auto now = std::chrono::steady_clock::now();
    reportDue_ = events.report = now - lastReport_ >= kServiceHeartbeat;
    if (reportDue_)
      lastReport_ = now;
    {
      // abort() answers them while this thread waits for the other ranks.
      std::lock_guard<std::mutex> lock(mutex_);
      handing_ = std::move(submissions);
    }
    Status st = shareEvents(*ranks_.ranks, *ranks_.device, events);
    std::lock_guard<std::mutex> lock(mutex_);
    submissions = std::move(handing_);
    handing_.clear();
    if (!st) {
      // Handed back: the failure refuses them, after the loop.
      for (auto it = submissions.rbegin(); it != submissions.rend(); ++it)
        submissions_.push_front(std::move(*it));
      cancels_.insert(cancels_.end(), cancels.begin(), cancels.end());
      return st;
    }
  }
  const std::optional<std::string> failed = failure();
  std::vector<Submitted> outcomes(submissions.size());
  for (size_t i = 0; i < submissions.size(); ++i) {
    Submitted &r = outcomes[i];
    if (failed) {
      r = {nullptr, Rejection::Unavailable, "the engine stopped: " + *failed};
      continue;
    }
    const bool busy = engine_->queueFull();
    auto id = engine_->submit(std::move(submissions[i].request));
    if (!id) {
      r = {nullptr, busy ? Rejection::Busy : Rejection::Invalid, id.status().message()};
      continue;
    }
    std::lock_guard<std::mutex> lock(streamsMutex_);
    if (aborted_) {
      engine_->cancel(*id);
      r = {nullptr, Rejection::Unavailable, "the engine stopped: " + failure().value_or("")};
      continue;
    }
    r.stream = std::make_shared<RequestStream>();
    r.stream->id_ = *id;
    streams_[*id] = r.stream;
  }
  for (int64_t id : cancels)
    engine_->cancel(id);
  std::vector<int64_t> ids;
  if (drainCancel)
    ids = cancelPending();
  // Before a submission's outcome is told, the snapshot counts what it
  // handed over (so a drain right after sees it pending); with nothing
  // handed over, the one after the step will do.
  if (!submissions.empty() || !cancels.empty() || drainCancel)
    publish();
  if (drainCancel) {
    std::lock_guard<std::mutex> lock(mutex_);
    drainCancel_(std::move(ids));
    drainCancel_ = nullptr;
  }
  handed_.notify_all();
  for (size_t i = 0; i < submissions.size(); ++i)
    submissions[i].done(std::move(outcomes[i]));
  return Status::ok();
}

std::vector<int64_t> EngineService::cancelPending() {
  std::vector<int64_t> ids;
  std::lock_guard<std::mutex> lock(streamsMutex_);
  for (auto &[id, stream] : streams_)
    if (engine_->cancel(id))
      ids.push_back(id);
  return ids;
}

void EngineService::deliver() {
  // Each stream is woken once, after everything of this step is pending.
  std::vector<std::shared_ptr<RequestStream>> touched;
  std::unique_lock<std::mutex> streamsLock(streamsMutex_);
  auto add = [&](int64_t id, auto change) {
    auto it = streams_.find(id);
    if (it == streams_.end())
      return;
    {
      std::lock_guard<std::mutex> lock(it->second->mutex_);
      change(it->second->pending_);
    }
    touched.push_back(it->second);
  };
  for (ScoredPrompt &p : engine_->takeScoredPrompts())
    add(p.id, [&](RequestStream::Update &u) { u.promptLogprobs = std::move(p.logprobs); });
  for (SampledToken &t : engine_->takeSampled())
    add(t.id, [&](RequestStream::Update &u) {
      u.tokens.push_back(t.token);
      if (t.logprob)
        u.logprobs.push_back(std::move(*t.logprob));
    });
  for (GenerationResult &r : engine_->takeFinished()) {
    const int64_t id = r.id;
    add(id, [&](RequestStream::Update &u) { u.result = std::move(r); });
    streams_.erase(id);
  }
  streamsLock.unlock();
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (const std::shared_ptr<RequestStream> &s : touched)
    s->wake();
}

void EngineService::publish() {
  ServiceSnapshot snap;
  snap.load = engine_->load();
  snap.stats = engine_->stats();
  snap.experts = figures_ ? figures_->experts : engine_->session().expertLoad();
  if (figures_)
    snap.ranks = figures_->ranks;
  snap.kvBytesPerBlock = engine_->kvBytesPerBlock();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    snap.draining = draining_;
    snapshot_ = std::move(snap);
  }
  handed_.notify_all();
}

Status followService(Engine &engine, Collective &ranks, Device &device) {
  std::set<int64_t> pending; // this engine's requests not finished yet
  for (;;) {
    ServiceEvents events;
    if (Status st = shareEvents(ranks, device, events); !st)
      return st;
    if (events.stop)
      return Status::ok();
    // Rank 0's engine accepted or refused each the same way: same state.
    for (GenerationRequest &r : events.submissions)
      if (auto id = engine.submit(std::move(r)))
        pending.insert(*id);
    for (int64_t id : events.cancels)
      engine.cancel(id);
    if (events.cancelAll)
      for (int64_t id : pending)
        engine.cancel(id);
    if (!engine.idle())
      if (Status st = engine.step(); !st)
        return st;
    if (events.report)
      if (auto figures = gatherJobFigures(ranks, device, engine); !figures)
        return figures.status();
    engine.takeSampled();
    engine.takeScoredPrompts();
    for (const GenerationResult &r : engine.takeFinished())
      pending.erase(r.id);
  }
}

} // namespace moe::rt
