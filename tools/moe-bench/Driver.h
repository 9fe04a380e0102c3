//===- Driver.h - feed a workload to an Engine and time it ------*- C++ -*-===//
#ifndef MOE_TOOLS_MOEBENCH_DRIVER_H
#define MOE_TOOLS_MOEBENCH_DRIVER_H

#include "moe/runtime/Engine.h"

#include <string>
#include <vector>

namespace moe::bench {

/// Closed loop (keep `concurrency` requests in flight) when `arrivals` is
/// empty; open loop otherwise (request i arrives at arrivals[i] seconds).
/// With several `ranks` (a plan with collectives) every rank must submit the
/// same requests at the same steps: closed loop does by itself (the engine
/// is deterministic), open loop goes by rank 0's clock. A plan whose ranks
/// hold different tokens (data-parallel attention) instead spreads the
/// requests over the ranks, request i to rank i mod ranks, and rank 0's
/// outcome is of all of them.
struct Load {
  int64_t concurrency = 1;
  std::vector<double> arrivals;
  rt::Collective *ranks = nullptr;
};

/// A request the engine refused for a reason other than a full queue.
struct Rejection {
  size_t request;
  std::string reason;
};

struct Outcome {
  /// Completed requests in request order; `id` is the request's index and
  /// `submitted` its arrival (open loop) or submission (closed loop) time.
  std::vector<rt::GenerationResult> results;
  /// The requests this outcome is of: all, or (ranks holding different
  /// tokens, on a rank but 0) this rank's share.
  size_t requests = 0;
  std::vector<Rejection> invalid;
  uint64_t queueFull = 0;
  rt::EngineStats stats;
  std::vector<rt::ExpertLoad> expertLoad; ///< tokens per (MoE layer, expert)
  uint64_t collectiveBytes = 0;           ///< handed to the plan's collectives
  double seconds = 0;
  int64_t kvBytesPerBlock = 0, hostBlocks = 0;
  int64_t kvBlocks = 0; ///< the pool, when not the options' (a server's)
};

/// Runs every request through a fresh engine. Rejected requests are
/// recorded and the rest keep being served; an engine failure is an error.
rt::Expected<Outcome> drive(const rt::LoadedPlan &plan, rt::Device &device,
                            const rt::EngineOptions &options,
                            const std::vector<rt::GenerationRequest> &requests, const Load &load,
                            bool progress);

} // namespace moe::bench

#endif
