//===- RankMerge.cpp - one outcome from the ranks' own --------------------===//
#include "tools/moe-bench/RankMerge.h"
#include "moe/runtime/Collective.h"
#include "tools/common/Ranks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moe::bench {

namespace {

/// Outcomes as I32 words: times in microseconds since the start, 64-bit
/// counters as two words.
class Words {
public:
  explicit Words(double start) : start_(start) {}
  void word(int64_t v) { w_.push_back(int32_t(v)); }
  void wide(uint64_t v) { tools::appendWide(w_, v); }
  void time(double t) { word(std::llround((t - start_) * 1e6)); }
  void seconds(double s) { word(std::llround(s * 1e6)); }
  std::vector<int32_t> &words() { return w_; }

private:
  double start_;
  std::vector<int32_t> w_;
};

class Reader {
public:
  Reader(const int32_t *p, double start) : p_(p), start_(start) {}
  int64_t word() { return *p_++; }
  uint64_t wide() {
    const uint64_t v = tools::readWide(p_);
    p_ += 2;
    return v;
  }
  double time() { return start_ + double(word()) * 1e-6; }
  double seconds() { return double(word()) * 1e-6; }

private:
  const int32_t *p_;
  double start_;
};

void write(Words &w, const Outcome &o) {
  const rt::EngineStats &s = o.stats;
  for (uint64_t v : {s.steps, s.prefillTokens, s.decodeTokens, s.preemptions, s.recomputedTokens,
                     s.rejected, s.cachedTokens, s.swapOuts, s.swapIns, s.swapOutBytes,
                     s.swapInBytes, uint64_t(o.requests)})
    w.wide(v);
  w.word(s.peakBlocks);
  w.word(s.peakHostBlocks);
  for (double v : {s.prefillSeconds, s.decodeSeconds, s.swapSeconds, o.seconds})
    w.seconds(v);
  for (const std::vector<Rejection> &kind : o.unserved) {
    w.word(int64_t(kind.size()));
    for (const Rejection &r : kind)
      w.word(int64_t(r.request));
  }
  w.word(int64_t(o.results.size()));
  for (const rt::GenerationResult &r : o.results) {
    w.word(r.id);
    w.word(r.preemptions);
    w.word(int64_t(r.finishReason));
    w.time(r.submitted);
    w.time(r.firstToken);
    w.time(r.finished);
    w.word(int64_t(r.tokens.size()));
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      w.word(r.tokens[i]);
      w.time(i < r.tokenTimes.size() ? r.tokenTimes[i] : r.finished);
    }
  }
}

/// Adds rank `rank`'s outcome, read from `r`, to `into`.
void add(Reader &r, int rank, Outcome &into) {
  rt::EngineStats &s = into.stats;
  for (uint64_t *v : {&s.steps, &s.prefillTokens, &s.decodeTokens, &s.preemptions,
                      &s.recomputedTokens, &s.rejected, &s.cachedTokens, &s.swapOuts,
                      &s.swapIns, &s.swapOutBytes, &s.swapInBytes})
    *v += r.wide();
  into.requests += size_t(r.wide());
  s.peakBlocks = std::max<int64_t>(s.peakBlocks, r.word());
  s.peakHostBlocks = std::max<int64_t>(s.peakHostBlocks, r.word());
  for (double *v : {&s.prefillSeconds, &s.decodeSeconds, &s.swapSeconds, &into.seconds})
    *v = std::max(*v, r.seconds());
  for (std::vector<Rejection> &kind : into.unserved)
    for (int64_t n = r.word(); n > 0; --n)
      kind.push_back({size_t(r.word()), "refused on rank " + std::to_string(rank) +
                                            " (its standard error says why)"});
  for (int64_t n = r.word(); n > 0; --n) {
    rt::GenerationResult g;
    g.id = r.word();
    g.preemptions = int(r.word());
    g.finishReason = rt::FinishReason(r.word());
    g.submitted = r.time();
    g.firstToken = r.time();
    g.finished = r.time();
    for (int64_t t = r.word(); t > 0; --t) {
      g.tokens.push_back(int32_t(r.word()));
      g.tokenTimes.push_back(r.time());
    }
    into.results.push_back(std::move(g));
  }
}

} // namespace

rt::Status mergeOverRanks(Outcome &out, double start, rt::Collective &ranks,
                          rt::Device &device) {
  Words mine(start);
  write(mine, out);
  // Every rank's length, then every rank's words padded to the longest.
  auto lengths = rt::gatherWords(ranks, device, {int32_t(mine.words().size())});
  if (!lengths)
    return lengths.status();
  const size_t longest = size_t(*std::max_element(lengths->begin(), lengths->end()));
  mine.words().resize(longest, 0);
  auto all = rt::gatherWords(ranks, device, mine.words());
  if (!all)
    return all.status();
  if (ranks.rank() != 0)
    return rt::Status::ok();
  Outcome merged;
  merged.kvBlocks = out.kvBlocks;
  merged.kvBytesPerBlock = out.kvBytesPerBlock;
  merged.hostBlocks = out.hostBlocks;
  merged.expertLoad = std::move(out.expertLoad);
  merged.collectiveBytes = out.collectiveBytes;
  for (int r = 0; r < ranks.size(); ++r) {
    Reader reader(all->data() + size_t(r) * longest, start);
    add(reader, r, merged);
  }
  std::sort(merged.results.begin(), merged.results.end(),
            [](const auto &a, const auto &b) { return a.id < b.id; });
  out = std::move(merged);
  return rt::Status::ok();
}

} // namespace moe::bench
