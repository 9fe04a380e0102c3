//===- RoutingProfile.h - traffic per (layer, expert), over runs -*- C++ -*-===//
//
// The tokens each logical expert of each MoE layer received, summed over
// the job's ranks, and accumulated over windows (runs) with exponential
// decay: adding a window multiplies the history's counts by the decay
// first, so recent traffic weighs more. Expert placement plans from it.
// The format and its files here; a run's window and the sum over the ranks
// are the runtime's (moe/runtime/RoutingWindow.h).
// The JSON form (docs/runtime.md, "Routing profile"):
//
//   {"format": "moe-routing-profile", "version": 1, "model_type": "...",
//    "num_experts": E, "top_k": k, "windows": n, "decay": d,
//    "tokens": decayed tokens of every window,
//    "last_window": {"tokens": t, "ranks": r, "ended": "UTC time"},
//    "layers": [{"layer": L, "counts": [E decayed counts]}, ...]}
//
//===----------------------------------------------------------------------===//
#ifndef MOE_ABI_ROUTINGPROFILE_H
#define MOE_ABI_ROUTINGPROFILE_H

#include "moe/abi/Status.h"

#include <cstdint>

#include <string>
#include <vector>

namespace moe::rt {

struct RoutingProfile {
  std::string modelType;
  int64_t numExperts = 0, topK = 0;
  int64_t windows = 0;  ///< runs merged into it
  double decay = 1.0;   ///< what the history was multiplied by when the last window was added
  double tokens = 0;    ///< routed tokens of every window, decayed as the counts are
  struct Window {
    uint64_t tokens = 0; ///< tokens routed through each MoE layer, over all ranks
    int64_t ranks = 1;
    std::string ended;   ///< ISO 8601, UTC
  } last;
  struct Layer {
    int64_t layer = 0;           ///< decoder layer
    std::vector<double> counts;  ///< per logical expert
  };
  std::vector<Layer> layers;
};

/// `window` added to `history`, whose counts and tokens are first
/// multiplied by `decay` (in [0, 1]); an error naming what differs when the
/// two are not of the same model and MoE layers.
Expected<RoutingProfile> mergeWindow(const RoutingProfile &history, const RoutingProfile &window,
                                     double decay);

Expected<RoutingProfile> parseRoutingProfile(const std::string &json);
std::string routingProfileJson(const RoutingProfile &profile);

/// `window` added to the profile in `path` (with `decay`), or alone when
/// there is no such file; an error naming the file when it holds something
/// else. Only reads: tools call it before the work, to refuse a bad file
/// early, and after it, to write the result.
Expected<RoutingProfile> addToProfileIn(const std::string &path, const RoutingProfile &window,
                                        double decay);

/// Writes `profile` to `path` whole: beside it, then renamed into place.
Status writeRoutingProfile(const std::string &path, const RoutingProfile &profile);

/// addToProfileIn, then writeRoutingProfile: what a run does at its end.
Status updateRoutingProfile(const std::string &path, const RoutingProfile &window, double decay);

} // namespace moe::rt

#endif
