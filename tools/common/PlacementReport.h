//===- PlacementReport.h - expert placements against traffic ----*- C++ -*-===//
//
// What moe-place and `moe-plan placement` print: per MoE layer, each rank's
// experts, the load a routing profile predicts for each rank and its
// max/mean, and, replaying a routing trace (tools/make-routing-trace.py),
// each step's max/mean (the slowest rank sets a step's time) and the whole
// window's.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_PLACEMENTREPORT_H
#define MOE_TOOLS_COMMON_PLACEMENTREPORT_H

#include "compiler/placement/ExpertPlacement.h"
#include "moe/abi/RoutingProfile.h"
#include "moe/abi/Status.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace moe::tools {

/// Per MoE layer id: every chosen step's counts per logical expert.
struct Trace {
  std::map<int64_t, std::vector<std::vector<double>>> steps;
  size_t count = 0; ///< steps chosen
};

/// The routing profile in `path` (--profile).
rt::Expected<rt::RoutingProfile> readProfile(const std::string &path);

/// The trace in `path` (--trace; none when empty), the steps of the days
/// `days` names (--days FIRST:LAST, 1 <= FIRST <= LAST; "" for all); it
/// must route `experts` experts in exactly `layers`.
rt::Expected<std::optional<Trace>> readTrace(const std::string &path, const std::string &days,
                                             const std::vector<int64_t> &layers,
                                             int64_t experts);

struct LayerPlacement {
  int64_t layer = 0;
  placement::Placement placement;
  const std::vector<double> *load = nullptr; ///< the profile's counts, if any
};

/// Prints one line per layer to `text` (and a mean over the layers) and
/// returns {"layers": [...], "summary": {...}} for --json.
nlohmann::json reportPlacement(std::FILE *text, const std::vector<LayerPlacement> &layers,
                               const Trace *trace);

} // namespace moe::tools

#endif
