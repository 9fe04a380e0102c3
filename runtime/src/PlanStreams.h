//===- PlanStreams.h - the order between a plan's streams, checked -*- C++ -*-===//
#ifndef MOE_RUNTIME_SRC_PLANSTREAMS_H
#define MOE_RUNTIME_SRC_PLANSTREAMS_H

#include "moe/abi/PlanFormat.h"
#include "moe/abi/Status.h"

namespace moe::rt {

/// Checks the events of `program` (numbered 0..n-1, each recorded by one
/// instruction, waited for only after it) and that no two instructions on
/// different streams touch the same tensor, KV-cache layer or overlapping
/// arena bytes, one of them writing, without an event ordering them: the
/// check moe-verify-schedule makes at compile time, on what the plan says.
/// Run after the indices have been checked.
Status checkStreams(const plan::Plan &plan, const plan::Program &program);

} // namespace moe::rt

#endif
