//===- ServiceEvents.cpp - rank 0's service events to every rank ----------===//
#include "moe/runtime/ServiceEvents.h"

#include "moe/runtime/RoutingWindow.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

namespace moe::rt {

namespace {

// Layout version: a rank built from other sources refuses the list.
constexpr int32_t kEventsTag = 0x4d4f4532;  // "MOE2"
constexpr int32_t kOutputsTag = 0x4d4f4f31; // "MOO1"

// The engine's outputs, field by field, for both directions (io: Writer's
// put or Reader's get).
template <typename IO, typename E> void entryFields(IO &io, E &e) {
  io.io(e.chosen);
  io.io(e.top);
}
template <typename IO, typename T> void sampledFields(IO &io, T &t) {
  io.io(t.id);
  io.io(t.token);
  io.io(t.logprob);
}
template <typename IO, typename P> void scoredFields(IO &io, P &p) {
  io.io(p.id);
  io.io(p.logprobs);
}
template <typename IO, typename R> void resultFields(IO &io, R &r) {
  static_assert(sizeof r.preemptions == 4 && sizeof r.finishReason == 4);
  io.io(r.id);
  io.io(r.tokens);
  io.io(r.submitted);
  io.io(r.firstToken);
  io.io(r.finished);
  io.io(r.tokenTimes);
  io.io(r.preemptions);
  io.io(r.finishReason);
  io.io(r.logprobs);
  io.io(r.promptLogprobs);
}

class Writer {
public:
  template <typename T> void put(T v) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0);
    const size_t at = words.size();
    words.resize(at + sizeof(T) / 4);
    std::memcpy(words.data() + at, &v, sizeof(T));
  }
  void put(bool v) { put(int32_t(v)); }
  void put(const std::string &s) {
    put(int64_t(s.size()));
    const size_t at = words.size();
    words.resize(at + (s.size() + 3) / 4, 0);
    std::memcpy(words.data() + at, s.data(), s.size());
  }
  template <typename T> void put(const std::vector<T> &v) {
    put(int64_t(v.size()));
    for (const T &x : v)
      put(x);
  }
  template <typename T> void put(const std::optional<T> &v) {
    put(bool(v));
    if (v)
      put(*v);
  }
  // The engine's outputs: their field lists below.
  void put(const LogprobEntry &e) { entryFields(*this, e); }
  void put(const SampledToken &t) { sampledFields(*this, t); }
  void put(const ScoredPrompt &p) { scoredFields(*this, p); }
  void put(const GenerationResult &r) { resultFields(*this, r); }
  template <typename T> void io(const T &v) { put(v); }
  std::vector<int32_t> words;
};

class Reader {
public:
  explicit Reader(const std::vector<int32_t> &w) : words_(w) {}
  bool ok() const { return ok_; }
  bool atEnd() const { return at_ == words_.size(); }
  template <typename T> void get(T &v) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % 4 == 0);
    if (!take(sizeof(T) / 4))
      return;
    std::memcpy(&v, words_.data() + at_ - sizeof(T) / 4, sizeof(T));
  }
  void get(bool &v) {
    int32_t w = 0;
    get(w);
    v = w != 0;
  }
  void get(std::string &s) {
    int64_t n = 0;
    get(n);
    if (n < 0 || !take((size_t(n) + 3) / 4))
      return fail();
    s.assign(reinterpret_cast<const char *>(words_.data() + at_ - (size_t(n) + 3) / 4),
             size_t(n));
  }
  template <typename T> void get(std::vector<T> &v) {
    int64_t n = 0;
    get(n);
    if (n < 0 || size_t(n) > words_.size() - at_) // every element takes a word at least
      return fail();
    v.resize(size_t(n));
    for (T &x : v)
      get(x);
  }
  template <typename T> void get(std::optional<T> &v) {
    bool present = false;
    get(present);
    v.reset();
    if (present)
      get(v.emplace());
  }
  void get(LogprobEntry &e) { entryFields(*this, e); }
  void get(SampledToken &t) { sampledFields(*this, t); }
  void get(ScoredPrompt &p) { scoredFields(*this, p); }
  void get(GenerationResult &r) {
    resultFields(*this, r);
    if (int32_t(r.finishReason) < int32_t(FinishReason::Length) ||
        int32_t(r.finishReason) > int32_t(FinishReason::Cancelled))
      fail();
  }
  template <typename T> void io(T &v) { get(v); }

private:
  bool take(size_t n) {
    if (!ok_ || n > words_.size() - at_)
      return fail(), false;
    at_ += n;
    return true;
  }
  void fail() { ok_ = false; }
  const std::vector<int32_t> &words_;
  size_t at_ = 0;
  bool ok_ = true;
};

// One list of fields for both directions.
template <typename IO, typename Request> void request(IO &io, Request &r) {
  io.put_or_get(r.prompt);
  io.put_or_get(r.maxNewTokens);
  io.put_or_get(r.sampling.temperature);
  io.put_or_get(r.sampling.topP);
  io.put_or_get(r.sampling.topK);
  io.put_or_get(r.sampling.seed);
  io.put_or_get(r.sampling.minP);
  io.put_or_get(r.sampling.repetitionPenalty);
  io.put_or_get(r.sampling.presencePenalty);
  io.put_or_get(r.sampling.frequencyPenalty);
  io.put_or_get(r.stop.ignoreEos);
  io.put_or_get(r.stop.strings);
  io.put_or_get(r.stop.stopTokenIds);
  io.put_or_get(r.stop.minTokens);
  io.put_or_get(r.stop.includeStopString);
  io.put_or_get(r.logprobs);
  io.put_or_get(r.promptLogprobs);
}

struct Out {
  Writer w;
  template <typename T> void put_or_get(const T &v) { w.put(v); }
};
struct In {
  Reader r;
  template <typename T> void put_or_get(T &v) { r.get(v); }
};

} // namespace

std::vector<int32_t> encodeEvents(const ServiceEvents &events) {
  Out out;
  out.w.put(kEventsTag);
  out.w.put(int64_t(events.submissions.size()));
  for (const GenerationRequest &r : events.submissions)
    request(out, r);
  out.w.put(events.owners);
  out.w.put(events.cancels);
  out.w.put(events.cancelAll);
  out.w.put(events.stop);
  out.w.put(events.report);
  return std::move(out.w.words);
}

Expected<ServiceEvents> decodeEvents(const std::vector<int32_t> &words) {
  In in{Reader(words)};
  ServiceEvents events;
  int32_t tag = 0;
  in.r.get(tag);
  if (tag != kEventsTag)
    return Status::error("service events: the list does not start with its tag (ranks built "
                         "from different sources?)");
  int64_t n = 0;
  in.r.get(n);
  if (n < 0 || size_t(n) > words.size())
    return Status::error("service events: " + std::to_string(n) + " submissions in " +
                         std::to_string(words.size()) + " words");
  events.submissions.resize(size_t(n));
  for (GenerationRequest &r : events.submissions)
    request(in, r);
  in.r.get(events.owners);
  in.r.get(events.cancels);
  in.r.get(events.cancelAll);
  in.r.get(events.stop);
  in.r.get(events.report);
  if (!in.r.ok() || !in.r.atEnd())
    return Status::error("service events: a malformed list of " + std::to_string(words.size()) +
                         " words");
  if (!events.owners.empty() && events.owners.size() != events.submissions.size())
    return Status::error("service events: " + std::to_string(events.owners.size()) +
                         " owners for " + std::to_string(events.submissions.size()) +
                         " submissions");
  return events;
}

std::vector<int32_t> encodeOutputs(const ServiceOutputs &outputs) {
  Writer w;
  w.put(kOutputsTag);
  w.put(outputs.scored);
  w.put(outputs.sampled);
  w.put(outputs.finished);
  return std::move(w.words);
}

Expected<ServiceOutputs> decodeOutputs(const std::vector<int32_t> &words) {
  Reader r(words);
  ServiceOutputs outputs;
  int32_t tag = 0;
  r.get(tag);
  if (tag != kOutputsTag)
    return Status::error("service outputs: the list does not start with its tag (ranks built "
                         "from different sources?)");
  r.get(outputs.scored);
  r.get(outputs.sampled);
  r.get(outputs.finished);
  if (!r.ok() || !r.atEnd())
    return Status::error("service outputs: a malformed list of " +
                         std::to_string(words.size()) + " words");
  return outputs;
}

Expected<std::vector<ServiceOutputs>> gatherOutputs(Collective &ranks, Device &device,
                                                    const ServiceOutputs &mine) {
  std::vector<int32_t> words = encodeOutputs(mine);
  // Every rank's length, then every rank's words padded to the longest.
  auto lengths = gatherWords(ranks, device, {int32_t(words.size())});
  if (!lengths)
    return lengths.status();
  const int32_t longest = *std::max_element(lengths->begin(), lengths->end());
  words.resize(size_t(longest), 0);
  auto all = gatherWords(ranks, device, words);
  if (!all)
    return all.status();
  std::vector<ServiceOutputs> out;
  if (ranks.rank() != 0)
    return out;
  for (int r = 0; r < ranks.size(); ++r) {
    const int32_t *w = all->data() + size_t(r) * size_t(longest);
    const int32_t n = (*lengths)[size_t(r)];
    if (n < 0 || n > longest)
      return Status::error("service outputs: rank " + std::to_string(r) + " sends " +
                           std::to_string(n) + " words");
    auto decoded = decodeOutputs(std::vector<int32_t>(w, w + n));
    if (!decoded)
      return Status::error("rank " + std::to_string(r) + ": " + decoded.status().message());
    out.push_back(decoded.take());
  }
  return out;
}

Status shareEvents(Collective &ranks, Device &device, ServiceEvents &events) {
  const bool first = ranks.rank() == 0;
  std::vector<int32_t> words = first ? encodeEvents(events) : std::vector<int32_t>();
  // The length, then the words: rank 0's plus zeros from the others.
  auto buffer = [&](size_t count) { return device.allocate(count * 4, MemoryKind::HostVisible); };
  Stream &stream = device.stream(0);
  auto share = [&](Buffer &b, size_t count) {
    if (Status st = ranks.allReduce(stream, {b.data(), DType::I32, count}); !st)
      return st;
    return stream.synchronize();
  };
  auto length = buffer(1);
  if (!length)
    return length.status();
  *static_cast<int32_t *>((*length)->host()) = first ? int32_t(words.size()) : 0;
  if (Status st = share(**length, 1); !st)
    return st;
  const int32_t count = *static_cast<const int32_t *>((*length)->host());
  if (count < 0)
    return Status::error("service events: rank 0 sends " + std::to_string(count) + " words");
  auto payload = buffer(size_t(count));
  if (!payload)
    return payload.status();
  auto *data = static_cast<int32_t *>((*payload)->host());
  if (first)
    std::memcpy(data, words.data(), words.size() * 4);
  else
    std::memset(data, 0, size_t(count) * 4);
  if (Status st = share(**payload, size_t(count)); !st)
    return st;
  if (first)
    return Status::ok();
  auto decoded = decodeEvents(std::vector<int32_t>(data, data + count));
  if (!decoded)
    return decoded.status();
  events = decoded.take();
  return Status::ok();
}

Expected<JobFigures> gatherJobFigures(Collective &ranks, Device &device, const Engine &engine) {
  const std::vector<ExpertLoad> &load = engine.session().expertLoad();
  RankFigures mine;
  mine.kvBlocksUsed = engine.load().usedBlocks;
  mine.collectiveBytes = engine.session().collectiveBytes();
  mine.collectiveNanoseconds = uint64_t(ranks.timeInCollectives().count());
  mine.picksReplaced = engine.stats().picksOfRankZero;
  mine.running = engine.load().running;
  mine.waiting = engine.load().waiting;
  for (const ExpertLoad &l : load)
    for (uint64_t c : l.counts)
      mine.expertRows += c;
  std::vector<int32_t> words;
  for (uint64_t v : {uint64_t(mine.kvBlocksUsed), mine.expertRows, mine.collectiveBytes,
                     mine.collectiveNanoseconds, mine.picksReplaced, uint64_t(mine.running),
                     uint64_t(mine.waiting)})
    appendWide(words, v);
  auto all = gatherWords(ranks, device, words);
  if (!all)
    return all.status();
  JobFigures job;
  for (int r = 0; r < ranks.size(); ++r) {
    const int32_t *w = all->data() + size_t(r) * words.size();
    job.ranks.push_back({int64_t(readWide(w)), readWide(w + 2), readWide(w + 4),
                         readWide(w + 6), readWide(w + 8), int64_t(readWide(w + 10)),
                         int64_t(readWide(w + 12))});
  }
  auto summed = sumOverRanks(ranks, device, load);
  if (!summed)
    return summed.status();
  job.experts = summed.take();
  return job;
}

} // namespace moe::rt
