//===- EngineService.cpp - the serving engine on its own thread -----------===//
#include "moe/runtime/EngineService.h"

namespace moe::rt {

RequestStream::Update RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait_for(lock, timeout,
                  [&] { return !pending_.tokens.empty() || pending_.result.has_value(); });
  Update out = std::move(pending_);
  pending_ = Update();
  return out;
}

EngineService::EngineService(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
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
  Submission s{std::move(request), {}, false};
  std::unique_lock<std::mutex> lock(mutex_);
  if (failure_)
    return {nullptr, Rejection::Unavailable, "the engine stopped: " + *failure_};
  if (draining_ || stop_)
    return {nullptr, Rejection::Unavailable,
            "the server is shutting down; send the request elsewhere"};
  submissions_.push_back(&s);
  wake_.notify_all();
  handed_.wait(lock, [&] { return s.done; });
  return std::move(s.result);
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

void EngineService::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return stop_ || drainCancel_ || !submissions_.empty() || !cancels_.empty() ||
               !engine_->idle();
      });
      if (stop_)
        break;
    }
    takeInbox();
    if (!engine_->idle())
      if (Status st = engine_->step(); !st) {
        std::lock_guard<std::mutex> lock(mutex_);
        failure_ = st.message();
        break;
      }
    // The snapshot first: a client that has its result sees its blocks free.
    publish();
    deliver();
  }
  // Stopped, or the engine failed: nothing pending is left waiting.
  takeInbox();
  std::vector<int64_t> ids = cancelPending();
  publish();
  deliver();
  std::lock_guard<std::mutex> lock(mutex_);
  if (drainCancel_)
    std::exchange(drainCancel_, nullptr)(std::move(ids));
  handed_.notify_all();
}

void EngineService::takeInbox() {
  std::deque<Submission *> submissions;
  std::vector<int64_t> cancels;
  std::function<void(std::vector<int64_t>)> drainCancel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submissions.swap(submissions_);
    cancels.swap(cancels_);
    drainCancel = drainCancel_;
  }
  const std::optional<std::string> failed = failure();
  for (Submission *s : submissions) {
    Submitted &r = s->result;
    if (failed) {
      r = {nullptr, Rejection::Unavailable, "the engine stopped: " + *failed};
      continue;
    }
    const bool busy = engine_->queueFull();
    auto id = engine_->submit(std::move(s->request));
    if (!id) {
      r = {nullptr, busy ? Rejection::Busy : Rejection::Invalid, id.status().message()};
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
  // Before submit() returns, the snapshot counts what it handed over (so a
  // drain right after sees it pending); with nothing handed over, the one
  // after the step will do.
  if (!submissions.empty() || !cancels.empty() || drainCancel)
    publish();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Submission *s : submissions)
      s->done = true;
    if (drainCancel) {
      drainCancel_(std::move(ids));
      drainCancel_ = nullptr;
    }
  }
  handed_.notify_all();
}

std::vector<int64_t> EngineService::cancelPending() {
  std::vector<int64_t> ids;
  for (auto &[id, stream] : streams_)
    if (engine_->cancel(id))
      ids.push_back(id);
  return ids;
}

void EngineService::deliver() {
  for (const SampledToken &t : engine_->takeSampled()) {
    auto it = streams_.find(t.id);
    if (it == streams_.end())
      continue;
    RequestStream &s = *it->second;
    {
      std::lock_guard<std::mutex> lock(s.mutex_);
      s.pending_.tokens.push_back(t.token);
    }
    s.ready_.notify_all();
  }
  for (GenerationResult &r : engine_->takeFinished()) {
    auto it = streams_.find(r.id);
    if (it == streams_.end())
      continue;
    RequestStream &s = *it->second;
    {
      std::lock_guard<std::mutex> lock(s.mutex_);
      s.pending_.result = std::move(r);
    }
    s.ready_.notify_all();
    streams_.erase(it);
  }
}

void EngineService::publish() {
  ServiceSnapshot snap;
  snap.load = engine_->load();
  snap.stats = engine_->stats();
  snap.experts = engine_->session().expertLoad();
  snap.kvBytesPerBlock = engine_->kvBytesPerBlock();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    snap.draining = draining_;
    snapshot_ = std::move(snap);
  }
  handed_.notify_all();
}

} // namespace moe::rt
