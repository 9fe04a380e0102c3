//===- EngineService.cpp - the serving engine on its own thread -----------===//
#include "moe/runtime/EngineService.h"

#include <algorithm>
#include <future>
#include <set>

namespace moe::rt {

namespace {

/// An engine's outputs of the last step, its ids as they are.
ServiceOutputs takeOutputs(Engine &engine) {
  return {engine.takeScoredPrompts(), engine.takeSampled(), engine.takeFinished()};
}

/// Ranks holding different tokens: the requests one rank's engine runs,
/// between its ids and the service's numbers.
class OwnRequests {
public:
  void add(int64_t engineId, int64_t serviceId) {
    serviceOf_[engineId] = serviceId;
    engineOf_[serviceId] = engineId;
  }
  /// A request its engine refused (it cannot, after rank 0's check, but if
  /// it did its stream must still end): cancelled at the next take.
  void refuse(int64_t serviceId) {
    GenerationResult r;
    r.id = serviceId;
    r.finishReason = FinishReason::Cancelled;
    refused_.push_back(std::move(r));
  }
  void cancel(Engine &engine, int64_t serviceId) {
    if (auto it = engineOf_.find(serviceId); it != engineOf_.end())
      engine.cancel(it->second);
  }
  void cancelAll(Engine &engine) {
    for (auto [engineId, serviceId] : serviceOf_)
      engine.cancel(engineId);
  }
  /// The engine's outputs under the service's numbers; finished requests
  /// are forgotten.
  ServiceOutputs take(Engine &engine) {
    ServiceOutputs out = takeOutputs(engine);
    for (ScoredPrompt &p : out.scored)
      p.id = serviceOf_.at(p.id);
    for (SampledToken &t : out.sampled)
      t.id = serviceOf_.at(t.id);
    for (GenerationResult &r : out.finished) {
      const int64_t engineId = r.id;
      r.id = serviceOf_.at(engineId);
      serviceOf_.erase(engineId);
      engineOf_.erase(r.id);
    }
    for (GenerationResult &r : refused_)
      out.finished.push_back(std::move(r));
    refused_.clear();
    return out;
  }

private:
  std::map<int64_t, int64_t> serviceOf_, engineOf_;
  std::vector<GenerationResult> refused_;
};

/// One step of all ranks holding different tokens: this engine's own, or
/// the others' joined.
Status stepWithRanks(Engine &engine) {
  if (!engine.idle())
    return engine.step();
  auto joined = engine.joinRanksStep();
  return joined ? Status::ok() : joined.status();
}

} // namespace

/// Rank 0's view of a job whose ranks hold different tokens: requests go
/// to data-parallel groups (one rank each, or M ranks with --dp-attention
/// --tp M, which all run the group's requests); rank 0 is in group 0.
struct EngineService::Placement {
  explicit Placement(int groups) : tokens(size_t(groups), 0), requests(size_t(groups), 0) {}
  OwnRequests own;
  int64_t nextId = 0;                          ///< the next submission's number
  std::map<int64_t, std::pair<int, int64_t>> placed; ///< unfinished: number -> group, tokens
  std::vector<int64_t> tokens, requests;       ///< per group: of its unfinished requests
  /// The group with the fewest tokens to come (prompt + most new tokens of
  /// its unfinished requests); the lowest of equals.
  int pick() const {
    return int(std::min_element(tokens.begin(), tokens.end()) - tokens.begin());
  }
  void place(int64_t id, int rank, int64_t n) {
    placed[id] = {rank, n};
    tokens[size_t(rank)] += n;
    ++requests[size_t(rank)];
  }
  void finish(int64_t id) {
    auto it = placed.find(id);
    if (it == placed.end())
      return;
    tokens[size_t(it->second.first)] -= it->second.second;
    --requests[size_t(it->second.first)];
    placed.erase(it);
  }
  int64_t elsewhere() const {
    int64_t n = 0;
    for (size_t r = 1; r < requests.size(); ++r)
      n += requests[r];
    return n;
  }
};

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
  if (ranks_.ranks && engine_->session().stepsWithRanks())
    placement_ = std::make_unique<Placement>(engine_->session().dataGroups());
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
    return submissions_.empty() && l.waiting + l.running + l.swapped + snapshot_.elsewhere == 0;
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
               !engine_->idle() || (placement_ && placement_->elsewhere() > 0);
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
    if (st && placement_)
      st = stepWithRanks(*engine_);
    else if (st && !engine_->idle())
      st = engine_->step();
    if (st && reportDue_) {
      auto figures = gatherJobFigures(*ranks_.ranks, *ranks_.device, *engine_);
      if (figures)
        figures_ = figures.take();
      else
        st = figures.status();
    }
    std::vector<ServiceOutputs> outputs;
    if (st) {
      auto collected = collect();
      if (collected)
        outputs = collected.take();
      else
        st = collected.status();
    }
    if (!st) {
      recordFailure(st.message());
      failed = true;
      break;
    }
    // The snapshot first: a client that has its result sees its blocks free.
    publish();
    deliver(std::move(outputs));
  }
  // Stopped, or the engine failed: nothing pending is left waiting (and,
  // stopped, the other ranks stop too).
  if (!failed)
    stopRanks();
  ranks_ = {};
  (void)takeInbox(); // ranks_ is cleared: nothing is shared, nothing can fail
  std::vector<int64_t> ids = cancelPending();
  auto outputs = collect(); // ranks_ is cleared: this engine's alone
  publish();
  deliver(outputs ? outputs.take() : std::vector<ServiceOutputs>());
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
  if (placement_)
    return takeInboxAcrossRanks(submissions, cancels, bool(drainCancel));
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

Status EngineService::takeInboxAcrossRanks(std::deque<Submission> &submissions,
                                           std::vector<int64_t> &cancels, bool cancelAll) {
  // Each submission is checked here (every rank's engine has the same plan
  // and options) and given to a rank, or refused, before it is shared.
  Placement &p = *placement_;
  const std::optional<std::string> failed = failure();
  std::vector<Submitted> outcomes(submissions.size());
  ServiceEvents events;
  for (size_t i = 0; i < submissions.size(); ++i) {
    Submitted &r = outcomes[i];
    GenerationRequest &request = submissions[i].request;
    if (failed || !ranks_.ranks) {
      r = {nullptr, Rejection::Unavailable,
           failed ? "the engine stopped: " + *failed
                  : std::string("the server is shutting down; send the request elsewhere")};
      continue;
    }
    if (Status st = engine_->check(request); !st) {
      r = {nullptr, Rejection::Invalid, st.message()};
      continue;
    }
    const int group = p.pick();
    if (p.requests[size_t(group)] >= engine_->maxWaiting()) {
      r = {nullptr, Rejection::Busy,
           "request rejected: every rank's waiting queue is full (" +
               std::to_string(p.requests[size_t(group)]) + " requests); retry later"};
      continue;
    }
    const int64_t id = p.nextId++;
    p.place(id, group, int64_t(request.prompt.size()) + request.maxNewTokens);
    r.stream = std::make_shared<RequestStream>();
    r.stream->id_ = id;
    {
      std::lock_guard<std::mutex> lock(streamsMutex_);
      streams_[id] = r.stream;
    }
    events.submissions.push_back(request);
    events.owners.push_back(group);
  }
  events.cancels = cancels;
  events.cancelAll = cancelAll;
  Status st = Status::ok();
  if (ranks_.ranks) {
    const auto now = std::chrono::steady_clock::now();
    reportDue_ = events.report = now - lastReport_ >= kServiceHeartbeat;
    if (reportDue_)
      lastReport_ = now;
    st = shareEvents(*ranks_.ranks, *ranks_.device, events);
  }
  if (st) {
    // This rank's share, as every other rank takes its own.
    int64_t id = p.nextId - int64_t(events.submissions.size());
    for (size_t i = 0; i < events.submissions.size(); ++i, ++id)
      if (events.owners[i] == 0) {
        if (auto engineId = engine_->submit(std::move(events.submissions[i])))
          p.own.add(*engineId, id);
        else
          p.own.refuse(id);
      }
    for (int64_t id : cancels)
      p.own.cancel(*engine_, id);
    if (cancelAll)
      p.own.cancelAll(*engine_);
  }
  if (!submissions.empty() || !cancels.empty() || cancelAll)
    publish();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelAll && drainCancel_) {
      // The ids of the streams still open: each ends with its rank's result.
      std::vector<int64_t> ids;
      for (const auto &[id, placed] : p.placed)
        ids.push_back(id);
      drainCancel_(std::move(ids));
      drainCancel_ = nullptr;
    }
  }
  handed_.notify_all();
  for (size_t i = 0; i < submissions.size(); ++i)
    submissions[i].done(std::move(outcomes[i]));
  return st;
}

std::vector<int64_t> EngineService::cancelPending() {
  std::vector<int64_t> ids;
  std::lock_guard<std::mutex> lock(streamsMutex_);
  if (placement_) {
    // Rank 0's own end through its engine; the other ranks' (they stopped
    // or failed: nothing more comes from them) at once.
    placement_->own.cancelAll(*engine_);
    for (auto &[id, stream] : streams_) {
      ids.push_back(id);
      auto placed = placement_->placed.find(id);
      if (placed != placement_->placed.end() && placed->second.first == 0)
        continue;
      placement_->own.refuse(id); // ends cancelled with this engine's, by collect()
    }
    return ids;
  }
  for (auto &[id, stream] : streams_)
    if (engine_->cancel(id))
      ids.push_back(id);
  return ids;
}

Expected<std::vector<ServiceOutputs>> EngineService::collect() {
  if (!placement_) {
    std::vector<ServiceOutputs> out;
    out.push_back(takeOutputs(*engine_));
    return out;
  }
  ServiceOutputs mine = placement_->own.take(*engine_);
  std::vector<ServiceOutputs> all;
  if (ranks_.ranks) {
    auto gathered = gatherOutputs(*ranks_.ranks, *ranks_.device, mine);
    if (!gathered)
      return gathered.status();
    all = gathered.take();
  } else {
    all.push_back(std::move(mine));
  }
  for (const ServiceOutputs &o : all)
    for (const GenerationResult &r : o.finished)
      placement_->finish(r.id);
  return all;
}

void EngineService::deliver(std::vector<ServiceOutputs> outputs) {
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
  for (ServiceOutputs &o : outputs) {
    for (ScoredPrompt &p : o.scored)
      add(p.id, [&](RequestStream::Update &u) { u.promptLogprobs = std::move(p.logprobs); });
    for (SampledToken &t : o.sampled)
      add(t.id, [&](RequestStream::Update &u) {
        u.tokens.push_back(t.token);
        if (t.logprob)
          u.logprobs.push_back(std::move(*t.logprob));
      });
    for (GenerationResult &r : o.finished) {
      const int64_t id = r.id;
      add(id, [&](RequestStream::Update &u) { u.result = std::move(r); });
      streams_.erase(id);
    }
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
  snap.elsewhere = placement_ ? placement_->elsewhere() : 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    snap.draining = draining_;
    snapshot_ = std::move(snap);
  }
  handed_.notify_all();
}

Status followService(Engine &engine, Collective &ranks, Device &device) {
  // Ranks holding different tokens: this rank's engine runs the
  // submissions given to its data group (numbered as rank 0 numbers them),
  // and every step's outputs go to rank 0, from the group's first rank
  // (the others run the same requests and sample the same tokens).
  // Otherwise it runs them all, as rank 0's.
  const bool own = engine.session().stepsWithRanks();
  const int group = engine.session().dataGroup();
  const bool reports = !engine.session().dataGroupRanks() ||
                       engine.session().dataGroupRanks()->rank() == 0;
  OwnRequests mine;
  int64_t nextId = 0;
  std::set<int64_t> pending; // in lockstep: this engine's requests not finished yet
  for (;;) {
    ServiceEvents events;
    if (Status st = shareEvents(ranks, device, events); !st)
      return st;
    if (events.stop)
      return Status::ok();
    if (own && events.owners.size() != events.submissions.size())
      return Status::error("service events: the submissions have no ranks (rank 0 runs a plan "
                           "whose ranks step together?)");
    for (size_t i = 0; i < events.submissions.size(); ++i, ++nextId) {
      if (own && events.owners[i] != group)
        continue;
      // In lockstep rank 0's engine accepted or refused each the same way.
      auto id = engine.submit(std::move(events.submissions[i]));
      if (id && own)
        mine.add(*id, nextId);
      else if (own)
        mine.refuse(nextId);
      else if (id)
        pending.insert(*id);
    }
    for (int64_t id : events.cancels)
      own ? mine.cancel(engine, id) : (void)engine.cancel(id);
    if (events.cancelAll) {
      if (own)
        mine.cancelAll(engine);
      for (int64_t id : pending)
        engine.cancel(id);
    }
    if (own || !engine.idle())
      if (Status st = own ? stepWithRanks(engine) : engine.step(); !st)
        return st;
    if (events.report)
      if (auto figures = gatherJobFigures(ranks, device, engine); !figures)
        return figures.status();
    if (own) {
      ServiceOutputs outputs = mine.take(engine);
      if (!reports)
        outputs = ServiceOutputs();
      if (auto sent = gatherOutputs(ranks, device, outputs); !sent)
        return sent.status();
      continue;
    }
    for (const GenerationResult &r : takeOutputs(engine).finished)
      pending.erase(r.id);
  }
}

} // namespace moe::rt
