//===- ExpertPlacement.cpp - experts onto ranks, planned from traffic -----===//
#include "compiler/placement/ExpertPlacement.h"

#include <algorithm>
#include <numeric>

namespace moe::placement {

namespace {

/// One physical expert to place.
struct Item {
  int expert;
  double load;
};

/// Index of the least loaded bin among those `open` says may take the item
/// (the lower index on ties); -1 when none may.
template <typename Open> int leastLoaded(const std::vector<double> &loads, Open open) {
  int best = -1;
  for (int b = 0; b < int(loads.size()); ++b)
    if (open(b) && (best < 0 || loads[size_t(b)] < loads[size_t(best)]))
      best = b;
  return best;
}

} // namespace

std::string checkOptions(int experts, const Options &o) {
  if (experts < 1 || o.ranks < 1 || o.redundant < 0 || o.ranksPerNode < 0)
    return "experts and ranks must be positive, redundant slots and ranks per node >= 0";
  // Packing costs (experts + redundant) x ranks steps: bounded for any input.
  if (experts > kMaxExperts || o.ranks > kMaxRanks || o.redundant > kMaxRedundant)
    return "at most " + std::to_string(kMaxExperts) + " experts, " + std::to_string(kMaxRanks) +
           " ranks and " + std::to_string(kMaxRedundant) + " redundant slots are placed";
  if ((experts + o.redundant) % o.ranks != 0) {
    const int up = (o.ranks - (experts + o.redundant) % o.ranks) % o.ranks;
    return std::to_string(experts) + " experts and " + std::to_string(o.redundant) +
           " redundant slots do not split evenly over " + std::to_string(o.ranks) +
           " ranks: use " + std::to_string(o.redundant + up) + " redundant slots";
  }
  if (o.ranksPerNode > 0 && o.ranks % o.ranksPerNode != 0)
    return std::to_string(o.ranks) + " ranks do not make whole nodes of " +
           std::to_string(o.ranksPerNode);
  if (o.redundant > experts * (o.ranks - 1))
    return std::to_string(o.redundant) + " redundant slots would put two replicas of an expert "
           "on one rank: at most " + std::to_string(experts * (o.ranks - 1));
  return "";
}

Placement roundRobin(int experts, int ranks) {
  Placement p;
  p.ranks = ranks;
  p.slotsPerRank = experts / ranks;
  for (int e = 0; e < experts; ++e)
    p.experts.push_back({{e % ranks, e / ranks}});
  return p;
}

Placement balanced(const std::vector<double> &load, const Options &o) {
  const int experts = int(load.size());
  const int slotsPerRank = (experts + o.redundant) / o.ranks;
  const int perNode = o.ranksPerNode > 0 ? o.ranksPerNode : o.ranks;
  const int nodes = o.ranks / perNode;

  // 1. Replicas, one redundant slot at a time, to the expert with the
  // highest load per replica (never more replicas than ranks).
  std::vector<int> replicas(size_t(experts), 1);
  for (int r = 0; r < o.redundant; ++r) {
    int best = -1;
    for (int e = 0; e < experts; ++e)
      if (replicas[size_t(e)] < o.ranks &&
          (best < 0 || load[size_t(e)] / replicas[size_t(e)] >
                           load[size_t(best)] / replicas[size_t(best)]))
        best = e;
    ++replicas[size_t(best)];
  }
  std::vector<Item> items;
  for (int e = 0; e < experts; ++e)
    for (int r = 0; r < replicas[size_t(e)]; ++r)
      items.push_back({e, load[size_t(e)] / replicas[size_t(e)]});
  std::stable_sort(items.begin(), items.end(),
                   [](const Item &a, const Item &b) { return a.load > b.load; });

  // 2. Nodes: each node takes perNode x slotsPerRank items, and fewer
  // replicas of one expert than it has ranks.
  std::vector<std::vector<Item>> nodeItems(static_cast<size_t>(nodes));
  std::vector<double> nodeLoad(size_t(nodes), 0.0);
  std::vector<std::vector<int>> copiesOn(size_t(nodes), std::vector<int>(size_t(experts), 0));
  for (const Item &item : items) {
    auto open = [&](int n) {
      return int(nodeItems[size_t(n)].size()) < perNode * slotsPerRank &&
             copiesOn[size_t(n)][size_t(item.expert)] < perNode;
    };
    int n = leastLoaded(nodeLoad, open);
    if (n < 0) // every node with room already has a replica per rank
      n = leastLoaded(nodeLoad, [&](int m) {
        return int(nodeItems[size_t(m)].size()) < perNode * slotsPerRank;
      });
    nodeItems[size_t(n)].push_back(item);
    nodeLoad[size_t(n)] += item.load;
    ++copiesOn[size_t(n)][size_t(item.expert)];
  }

  // 3. Ranks within each node, never two replicas of an expert on one rank
  // while another rank has room.
  std::vector<std::vector<int>> onRank(size_t(o.ranks));
  for (int n = 0; n < nodes; ++n) {
    std::vector<double> rankLoad(size_t(perNode), 0.0);
    for (const Item &item : nodeItems[size_t(n)]) {
      auto room = [&](int r) { return int(onRank[size_t(n * perNode + r)].size()) < slotsPerRank; };
      int r = leastLoaded(rankLoad, [&](int q) {
        const std::vector<int> &held = onRank[size_t(n * perNode + q)];
        return room(q) && std::find(held.begin(), held.end(), item.expert) == held.end();
      });
      if (r < 0)
        r = leastLoaded(rankLoad, room);
      onRank[size_t(n * perNode + r)].push_back(item.expert);
      rankLoad[size_t(r)] += item.load;
    }
  }

  // Slots on each rank in expert order.
  Placement p;
  p.ranks = o.ranks;
  p.slotsPerRank = slotsPerRank;
  p.experts.resize(size_t(experts));
  for (int r = 0; r < o.ranks; ++r) {
    std::vector<int> &held = onRank[size_t(r)];
    std::sort(held.begin(), held.end());
    for (int s = 0; s < int(held.size()); ++s)
      p.experts[size_t(held[size_t(s)])].push_back({r, s});
  }
  return p;
}

std::vector<double> rankLoads(const Placement &p, const std::vector<double> &load) {
  std::vector<double> loads(size_t(p.ranks), 0.0);
  for (size_t e = 0; e < p.experts.size() && e < load.size(); ++e)
    for (const Slot &s : p.experts[e])
      loads[size_t(s.rank)] += load[e] / double(p.experts[e].size());
  return loads;
}

double imbalance(const std::vector<double> &loads) {
  const double total = std::accumulate(loads.begin(), loads.end(), 0.0);
  if (loads.empty() || total <= 0)
    return 1.0;
  return *std::max_element(loads.begin(), loads.end()) / (total / double(loads.size()));
}

std::string verify(const Placement &p, int experts, bool filled) {
  if (int(p.experts.size()) != experts)
    return "it places " + std::to_string(p.experts.size()) + " experts, not " +
           std::to_string(experts);
  std::vector<int> used(size_t(p.ranks * p.slotsPerRank), -1);
  for (int e = 0; e < experts; ++e) {
    if (p.experts[size_t(e)].empty())
      return "expert " + std::to_string(e) + " has no slot";
    for (const Slot &s : p.experts[size_t(e)]) {
      if (s.rank < 0 || s.rank >= p.ranks || s.slot < 0 || s.slot >= p.slotsPerRank)
        return "expert " + std::to_string(e) + " has slot " + std::to_string(s.slot) +
               " of rank " + std::to_string(s.rank) + ", outside " + std::to_string(p.ranks) +
               " ranks of " + std::to_string(p.slotsPerRank) + " slots";
      int &owner = used[size_t(s.rank * p.slotsPerRank + s.slot)];
      if (owner >= 0)
        return "slot " + std::to_string(s.slot) + " of rank " + std::to_string(s.rank) +
               " holds experts " + std::to_string(owner) + " and " + std::to_string(e);
      owner = e;
    }
  }
  for (size_t i = 0; filled && i < used.size(); ++i)
    if (used[i] < 0)
      return "slot " + std::to_string(i % size_t(p.slotsPerRank)) + " of rank " +
             std::to_string(i / size_t(p.slotsPerRank)) + " holds no expert";
  return "";
}

} // namespace moe::placement
