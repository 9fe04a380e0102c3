//===- RankMerge.h - one outcome from the ranks' own ----------*- C++ -*-===//
//
// With data-parallel attention each rank serves its own requests; the
// report is of all of them. Every rank sends its outcome (results with
// their times relative to the common start, counters, rejected requests)
// and rank 0 gets the merged one: results of every rank in request order,
// counters summed, peaks and durations the largest.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOEBENCH_RANKMERGE_H
#define MOE_TOOLS_MOEBENCH_RANKMERGE_H

#include "tools/moe-bench/Driver.h"

namespace moe::bench {

/// Every rank must call it; `start` is this rank's engine clock at the
/// common start. Rank 0's `out` becomes the merged outcome (the others'
/// are left as they were).
rt::Status mergeOverRanks(Outcome &out, double start, rt::Collective &ranks,
                          rt::Device &device);

} // namespace moe::bench

#endif
