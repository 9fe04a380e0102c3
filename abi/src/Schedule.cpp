//===- Schedule.cpp - happens-before over streams and events --------------===//
#include "moe/abi/Schedule.h"

#include <algorithm>
#include <map>
#include <string>

namespace moe::rt {

Expected<HappensBefore> HappensBefore::compute(const std::vector<ScheduleStep> &steps,
                                               const std::function<std::string(size_t)> &name) {
  auto step = [&](size_t i) { return name ? name(i) : "step " + std::to_string(i); };
  HappensBefore hb;
  for (const ScheduleStep &s : steps) {
    if (s.stream < 0 || s.stream > 255)
      return Status::error("stream " + std::to_string(s.stream) + " out of range [0, 255]");
    hb.streams_ = std::max(hb.streams_, s.stream + 1);
  }
  // clock[s][t]: how many steps of stream t stream s has seen complete.
  std::vector<std::vector<uint32_t>> clock(size_t(hb.streams_),
                                           std::vector<uint32_t>(size_t(hb.streams_), 0));
  std::map<int64_t, std::vector<uint32_t>> events;
  hb.stream_.reserve(steps.size());
  hb.clock_.reserve(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const ScheduleStep &s = steps[i];
    std::vector<uint32_t> &c = clock[size_t(s.stream)];
    if (s.wait >= 0) {
      auto e = events.find(s.wait);
      if (e == events.end())
        return Status::error(step(i) + " waits for event " + std::to_string(s.wait) +
                             ", which nothing recorded before it");
      for (size_t t = 0; t < c.size(); ++t)
        c[t] = std::max(c[t], e->second[t]);
    }
    ++c[size_t(s.stream)];
    hb.stream_.push_back(s.stream);
    hb.clock_.push_back(c);
    if (s.record >= 0 && !events.emplace(s.record, c).second)
      return Status::error("event " + std::to_string(s.record) + " is recorded twice (again by " +
                           step(i) + ")");
  }
  return hb;
}

bool HappensBefore::ordered(size_t a, size_t b) const {
  if (a >= b)
    return false;
  const size_t sa = size_t(stream_[a]);
  // b has seen a's stream up to (at least) a itself.
  return clock_[b][sa] >= clock_[a][sa];
}

std::optional<Race> findRace(const std::vector<ScheduleStep> &steps, const HappensBefore &order,
                             const std::function<bool(int64_t, int64_t)> &overlap) {
  if (!order.multiStream())
    return std::nullopt; // one stream: program order orders everything
  auto conflict = [&](const ScheduleStep &a, const ScheduleStep &b) -> std::optional<Race> {
    auto check = [&](const std::vector<int64_t> &xs, const std::vector<int64_t> &ys)
        -> std::optional<std::pair<int64_t, int64_t>> {
      for (int64_t x : xs)
        for (int64_t y : ys)
          if (overlap(x, y))
            return std::make_pair(x, y);
      return std::nullopt;
    };
    for (auto pair : {check(a.writes, b.writes), check(a.writes, b.reads),
                      check(a.reads, b.writes)})
      if (pair)
        return Race{0, 0, pair->first, pair->second};
    return std::nullopt;
  };
  for (size_t j = 0; j < steps.size(); ++j)
    for (size_t i = 0; i < j; ++i) {
      if (steps[i].stream == steps[j].stream || order.ordered(i, j))
        continue;
      if (auto race = conflict(steps[i], steps[j])) {
        race->first = i;
        race->second = j;
        return race;
      }
    }
  return std::nullopt;
}

} // namespace moe::rt
