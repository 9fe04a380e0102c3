// Expert placement against closed forms (uniform load, one hot expert) and
// against brute force over every placement of small cases: the balanced
// plan is valid, deterministic, keeps replicas on distinct ranks, and its
// most loaded rank is within the LPT bound of the optimum.
#include "compiler/placement/ExpertPlacement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

using namespace moe::placement;

namespace {

TEST(ExpertPlacement, RoundRobinDealsExpertsInTurn) {
  Placement p = roundRobin(8, 4);
  EXPECT_EQ(verify(p, 8), "");
  EXPECT_EQ(p.slotsPerRank, 2);
  EXPECT_EQ(p.experts[5], (std::vector<Slot>{{1, 1}}));
}

TEST(ExpertPlacement, OptionsThatCannotBePlacedAreRefusedWithAFix) {
  EXPECT_EQ(checkOptions(64, {8, 4, 16}), "");
  EXPECT_EQ(checkOptions(64, {8, 0, 3}),
            "64 experts and 3 redundant slots do not split evenly over 8 ranks: use 8 "
            "redundant slots");
  EXPECT_EQ(checkOptions(64, {8, 3, 0}), "8 ranks do not make whole nodes of 3");
  EXPECT_EQ(checkOptions(2, {2, 0, 4}),
            "4 redundant slots would put two replicas of an expert on one rank: at most 2");
  EXPECT_EQ(checkOptions(20000, {4, 0, 0}),
            "at most 16384 experts, 4096 ranks and 65536 redundant slots are placed");
}

TEST(ExpertPlacement, UniformLoadIsPerfectlyBalanced) {
  const std::vector<double> load(64, 10.0);
  Placement p = balanced(load, {8, 4, 0});
  EXPECT_EQ(verify(p, 64), "");
  EXPECT_DOUBLE_EQ(imbalance(rankLoads(p, load)), 1.0);
}

// One expert of 16 carries 15, the others 1 each (30 in all, 7.5 a rank
// on 4 ranks). Without replicas its rank also takes 3 others (4 slots a
// rank): 18 / 7.5 = 2.4. With 4 redundant slots it gets a replica on every
// rank (3 of them: 3.75 each) and the fourth goes to a cold expert (two
// halves): each rank holds 3.75 and 4 of the 14 ones and 2 halves, at best
// 3.75 + 4 = 7.75 on the heaviest: 7.75 / 7.5.
TEST(ExpertPlacement, AHotExpertIsReplicatedOntoEveryRank) {
  std::vector<double> load(16, 1.0);
  load[5] = 15.0;
  EXPECT_DOUBLE_EQ(imbalance(rankLoads(balanced(load, {4, 0, 0}), load)), 2.4);
  Placement p = balanced(load, {4, 2, 4});
  EXPECT_EQ(verify(p, 16), "");
  ASSERT_EQ(p.experts[5].size(), 4u);
  std::vector<int> ranks;
  for (const Slot &s : p.experts[5])
    ranks.push_back(s.rank);
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(imbalance(rankLoads(p, load)), 7.75 / 7.5);
}

/// The smallest possible most-loaded rank over every assignment of
/// `items` to `ranks` ranks of `perRank` items each.
double bestMax(const std::vector<double> &items, int ranks, int perRank) {
  std::vector<double> loads(size_t(ranks), 0.0);
  std::vector<int> count(size_t(ranks), 0);
  double best = 1e300;
  std::function<void(size_t)> go = [&](size_t i) {
    if (i == items.size()) {
      best = std::min(best, *std::max_element(loads.begin(), loads.end()));
      return;
    }
    for (int r = 0; r < ranks; ++r)
      if (count[size_t(r)] < perRank) {
        loads[size_t(r)] += items[i];
        ++count[size_t(r)];
        go(i + 1);
        loads[size_t(r)] -= items[i];
        --count[size_t(r)];
      }
  };
  go(0);
  return best;
}

// Random skewed loads, 8 experts on 2 or 4 ranks without replicas: the
// balanced plan's most loaded rank is at most 4/3 of the optimum (Graham's
// bound for longest-processing-time packing), and the same on a rerun.
TEST(ExpertPlacement, WithinTheLptBoundOfBruteForce) {
  std::mt19937 rng(11);
  std::lognormal_distribution<double> skew(0.0, 1.0);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<double> load(8);
    for (double &l : load)
      l = skew(rng);
    for (int ranks : {2, 4}) {
      Placement p = balanced(load, {ranks, 0, 0});
      ASSERT_EQ(verify(p, 8), "");
      const std::vector<double> loads = rankLoads(p, load);
      const double got = *std::max_element(loads.begin(), loads.end());
      const double best = bestMax(load, ranks, 8 / ranks);
      EXPECT_LE(got, best * 4.0 / 3.0 + 1e-12) << "trial " << trial << ", " << ranks << " ranks";
      EXPECT_EQ(balanced(load, {ranks, 0, 0}).experts, p.experts);
    }
  }
}

// Nodes first: 2 nodes of 2 ranks, the heavy experts spread over both.
TEST(ExpertPlacement, NodesAreBalancedBeforeRanks) {
  const std::vector<double> load = {8, 8, 1, 1, 1, 1, 1, 1};
  Placement p = balanced(load, {4, 2, 0});
  EXPECT_EQ(verify(p, 8), "");
  EXPECT_NE(p.experts[0][0].rank / 2, p.experts[1][0].rank / 2);
  const std::vector<double> loads = rankLoads(p, load);
  EXPECT_DOUBLE_EQ(loads[0] + loads[1], loads[2] + loads[3]);
}

TEST(ExpertPlacement, VerifyNamesWhatIsWrong) {
  Placement p = roundRobin(4, 2);
  p.experts[3] = {{0, 0}};
  EXPECT_EQ(verify(p, 4), "slot 0 of rank 0 holds experts 0 and 3");
  p.experts[3] = {{2, 0}};
  EXPECT_EQ(verify(p, 4), "expert 3 has slot 0 of rank 2, outside 2 ranks of 2 slots");
  p.experts[3] = {};
  EXPECT_EQ(verify(p, 4), "expert 3 has no slot");
  // 3 experts over 2 ranks of 2 slots (a plan's contiguous shares): a slot
  // left empty is refused only of a planner's placement.
  Placement uneven = roundRobin(4, 2);
  uneven.experts.pop_back();
  EXPECT_EQ(verify(uneven, 3), "slot 1 of rank 1 holds no expert");
  EXPECT_EQ(verify(uneven, 3, /*filled=*/false), "");
}

} // namespace
