//===- RoutingWindow.h - a run's routing counts as a profile ----*- C++ -*-===//
//
// What a run adds to a routing profile (moe/abi/RoutingProfile.h): the
// session's counts, summed over the job's ranks, as one window.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_ROUTINGWINDOW_H
#define MOE_RUNTIME_ROUTINGWINDOW_H

#include "moe/abi/RoutingProfile.h"
#include "moe/runtime/Session.h"

#include <vector>

namespace moe::rt {

class Collective;

/// This run's counts (already summed over `ranks` ranks) as a profile of
/// one window, ended now.
RoutingProfile routingWindow(const plan::Plan &plan, const std::vector<ExpertLoad> &load,
                             int64_t ranks);

/// The counts summed over the job's ranks: every rank must call it.
Expected<std::vector<ExpertLoad>> sumOverRanks(Collective &ranks, Device &device,
                                               const std::vector<ExpertLoad> &load);

} // namespace moe::rt

#endif
