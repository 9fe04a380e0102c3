//===- ExpertPlacement.h - experts onto ranks, planned from traffic -*- C++ -*-===//
//
// Where the experts of one MoE layer live across ranks: each logical expert
// has one or more physical slots (rank, slot on that rank); every rank holds
// the same number of slots, so that its expert weights take the same memory.
// A replicated expert's tokens are spread evenly over its replicas, so a
// slot's load is its expert's load divided by the expert's replica count.
//
// `balanced` plans from a load per expert (a routing profile's counts):
//  1. replicas: each redundant slot goes, in turn, to the expert with the
//     highest load per replica (as DeepSeek's EPLB replicates);
//  2. nodes, then ranks: physical experts, heaviest first, each to the least
//     loaded node with a free slot, then within each node to the least
//     loaded rank with a free slot that does not already hold that expert
//     (longest-processing-time packing under equal slot counts).
// Pure C++: the moe-place-experts pass, moe-place and moe-plan share it.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_PLACEMENT_EXPERTPLACEMENT_H
#define MOE_COMPILER_PLACEMENT_EXPERTPLACEMENT_H

#include <string>
#include <utility>
#include <vector>

namespace moe::placement {

struct Slot {
  int rank = 0, slot = 0;
  bool operator==(const Slot &o) const { return rank == o.rank && slot == o.slot; }
};

struct Placement {
  int ranks = 1, slotsPerRank = 0;
  std::vector<std::vector<Slot>> experts; ///< per logical expert: its slots
};

struct Options {
  int ranks = 1;
  int ranksPerNode = 0; ///< 0: all ranks on one node
  int redundant = 0;    ///< slots beyond one per expert
};

/// The largest problem placed (the importer's expert ceiling).
constexpr int kMaxExperts = 16384, kMaxRanks = 4096, kMaxRedundant = 65536;

/// Why `options` cannot place `experts` experts ("" when they can): the
/// slots (experts + redundant) must split evenly over the ranks, and the
/// ranks over the nodes, within the limits above.
std::string checkOptions(int experts, const Options &options);

/// Expert e on rank e mod ranks (no replicas; experts must divide evenly).
Placement roundRobin(int experts, int ranks);

/// Planned from `load` (per logical expert, >= 0) as above; checkOptions
/// must have accepted the options. Deterministic: ties go to the lower id.
Placement balanced(const std::vector<double> &load, const Options &options);

/// Each rank's load: the sum over its slots of load[e] / replicas of e.
std::vector<double> rankLoads(const Placement &placement, const std::vector<double> &load);

/// max / mean of `loads` (1 when all are 0).
double imbalance(const std::vector<double> &loads);

/// Why `placement` is not a placement of `experts` experts ("" when it
/// is): every expert has a slot, no slot holds two, and (`filled`, as the
/// planners place) every slot of every rank holds one; a plan's contiguous
/// shares (moe-shard-experts) may leave a rank a slot fewer.
std::string verify(const Placement &placement, int experts, bool filled = true);

} // namespace moe::placement

#endif
