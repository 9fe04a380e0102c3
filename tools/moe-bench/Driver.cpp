//===- Driver.cpp - feed a workload to an Engine and time it --------------===//
#include "tools/moe-bench/Driver.h"
#include "tools/moe-bench/RankMerge.h"
#include "moe/runtime/Collective.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

namespace moe::bench {

const char *unservedKey(Unserved kind) {
  switch (kind) {
  case Unserved::Busy: return "refused_busy";
  case Unserved::Unavailable: return "refused_unavailable";
  case Unserved::Invalid: return "invalid";
  case Unserved::Failed: return "failed";
  }
  return "";
}

const char *unservedWords(Unserved kind) {
  switch (kind) {
  case Unserved::Busy: return "refused as busy";
  case Unserved::Unavailable: return "refused as unavailable";
  case Unserved::Invalid: return "invalid";
  case Unserved::Failed: return "failed";
  }
  return "";
}

size_t Outcome::settled() const {
  size_t n = results.size();
  for (const std::vector<Rejection> &r : unserved)
    n += r.size();
  return n;
}

rt::Expected<Outcome> drive(const rt::LoadedPlan &plan, rt::Device &device,
                            const rt::EngineOptions &options,
                            const std::vector<rt::GenerationRequest> &requests, const Load &load,
                            bool progress) {
  auto engine = rt::Engine::create(plan, device, options);
  if (!engine)
    return engine.status();
  rt::Engine &e = **engine;
  Outcome out;
  out.kvBlocks = options.numBlocks;
  out.kvBytesPerBlock = e.kvBytesPerBlock();
  out.hostBlocks = e.hostBlocks();
  bool open = !load.arrivals.empty();
  const int ranks = load.ranks ? load.ranks->size() : 1;
  // Ranks holding different tokens (data-parallel attention) serve every
  // groups-th request from their data group's own (every rank of the group
  // the same ones); otherwise every rank serves them all.
  const bool own = e.session().stepsWithRanks();
  const int groups = e.session().dataGroups(), group = e.session().dataGroup();
  std::vector<size_t> mine;
  for (size_t i = 0; i < requests.size(); ++i)
    if (!own || int(i % size_t(groups)) == group)
      mine.push_back(i);
  out.requests = mine.size();
  size_t next = 0;
  std::map<int64_t, size_t> requestOf; // engine id -> index in `requests`
  // Several ranks in open loop: start the clocks together (rank 0's
  // decides the arrivals; a rank that started later would sleep longer).
  if (open && ranks > 1)
    if (auto together = rt::gatherWords(*load.ranks, device, {0}); !together)
      return together.status();
  double start = e.clock();
  while (out.settled() < mine.size()) {
    double t = e.clock() - start;
    size_t arrived = size_t(std::upper_bound(load.arrivals.begin(), load.arrivals.end(), t) -
                            load.arrivals.begin());
    if (open && ranks > 1 && !own) { // the same requests at the same steps
      auto agreed = rt::gatherWords(*load.ranks, device, {int32_t(arrived)});
      if (!agreed)
        return agreed.status();
      arrived = size_t((*agreed)[0]); // rank 0's
    }
    while (next < mine.size() &&
           (open ? mine[next] < arrived : int64_t(next - out.settled()) < load.concurrency)) {
      const bool busy = e.queueFull(); // asked first, as EngineService does
      auto id = e.submit(requests[mine[next]]);
      if (id)
        requestOf[*id] = mine[next];
      else
        out.of(busy ? Unserved::Busy : Unserved::Invalid)
            .push_back({mine[next], id.status().message()});
      ++next;
    }
    if (e.idle()) {
      // Nothing to run here now: join the other ranks' step, if they step
      // together, else wait for the next arrival (a little at a time while
      // other ranks may want this one in their steps).
      bool joined = false;
      if (own) {
        auto ran = e.joinRanksStep();
        if (!ran)
          return ran.status();
        joined = *ran;
      }
      if (!joined && open && next < mine.size())
        std::this_thread::sleep_for(std::chrono::duration<double>(
            std::min(load.arrivals[mine[next]] - t, own ? 1e-3 : 1e9)));
      continue;
    }
    if (rt::Status st = e.step(); !st)
      return st;
    for (rt::GenerationResult &r : e.takeFinished()) {
      r.id = int64_t(requestOf.at(r.id)); // results name their request
      if (open) // latency counts from arrival, not from when the loop got to it
        r.submitted = start + load.arrivals[size_t(r.id)];
      out.results.push_back(std::move(r));
    }
    if (progress && e.stats().steps % 20 == 0)
      std::fprintf(stderr, "\r  %zu/%zu requests done, %llu steps, %lld KV blocks in use   ",
                   out.results.size(), mine.size(), (unsigned long long)e.stats().steps,
                   (long long)e.stats().peakBlocks);
  }
  if (rt::Status st = e.waitForRanks(); !st)
    return st;
  if (progress)
    std::fprintf(stderr, "\r%80s\r", "");
  out.seconds = e.clock() - start;
  out.stats = e.stats();
  out.expertLoad = e.session().expertLoad();
  out.collectiveBytes = e.session().collectiveBytes();
  std::sort(out.results.begin(), out.results.end(),
            [](const auto &a, const auto &b) { return a.id < b.id; });
  if (own) {
    // Of a data group's ranks (the same requests), the first reports them.
    if (rt::Collective *mates = e.session().dataGroupRanks(); mates && mates->rank() != 0) {
      Outcome none; // what rank 0 reports of this rank: nothing; its own counters stay
      none.expertLoad = std::move(out.expertLoad);
      none.collectiveBytes = out.collectiveBytes;
      out = std::move(none);
    }
    if (rt::Status st = mergeOverRanks(out, start, *load.ranks, device); !st)
      return st;
  }
  return out;
}

} // namespace moe::bench
