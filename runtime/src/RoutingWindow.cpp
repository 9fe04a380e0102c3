//===- RoutingWindow.cpp - a run's routing counts as a profile -----------===//
#include "moe/runtime/RoutingWindow.h"
#include "moe/runtime/Collective.h"

#include <algorithm>
#include <ctime>

namespace moe::rt {

namespace {

std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

} // namespace

RoutingProfile routingWindow(const plan::Plan &plan, const std::vector<ExpertLoad> &load,
                             int64_t ranks) {
  RoutingProfile p;
  p.modelType = plan.config()->model_type()->str();
  p.numExperts = plan.config()->num_experts();
  p.topK = plan.config()->top_k();
  p.windows = 1;
  for (const ExpertLoad &l : load)
    p.layers.push_back({l.layer, std::vector<double>(l.counts.begin(), l.counts.end())});
  // Every token passes every MoE layer once and picks top_k experts there.
  uint64_t picks = 0;
  if (!load.empty())
    for (uint64_t c : load.front().counts)
      picks += c;
  p.last = {picks / uint64_t(std::max<int64_t>(1, p.topK)), ranks, utcNow()};
  p.tokens = double(p.last.tokens);
  return p;
}

Expected<std::vector<ExpertLoad>> sumOverRanks(Collective &ranks, Device &device,
                                               const std::vector<ExpertLoad> &load) {
  // Each count as two I32 words (31 low bits, the rest): exact up to 2^62.
  std::vector<int32_t> mine;
  for (const ExpertLoad &l : load)
    for (uint64_t c : l.counts) {
      mine.push_back(int32_t(c & 0x7fffffffu));
      mine.push_back(int32_t(c >> 31));
    }
  auto all = gatherWords(ranks, device, mine);
  if (!all)
    return all.status();
  std::vector<ExpertLoad> sum = load;
  for (int r = 0; r < ranks.size(); ++r) {
    size_t w = size_t(r) * mine.size();
    for (ExpertLoad &l : sum)
      for (uint64_t &c : l.counts) {
        if (r == 0)
          c = 0;
        c += uint64_t(uint32_t((*all)[w])) | uint64_t(uint32_t((*all)[w + 1])) << 31;
        w += 2;
      }
  }
  return sum;
}

} // namespace moe::rt
