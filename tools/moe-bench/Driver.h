//===- Driver.h - feed a workload to an Engine and time it ------*- C++ -*-===//
#ifndef MOE_TOOLS_MOEBENCH_DRIVER_H
#define MOE_TOOLS_MOEBENCH_DRIVER_H

#include "moe/runtime/Engine.h"

#include <array>
#include <iterator>
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

/// Why a request was not completed. Busy and Unavailable are a server
/// refusing for load, not for the request: its waiting queue is full (the
/// engine's --max-waiting; HTTP 429), or it is at its --max-connections or
/// draining (HTTP 503). Invalid is the request refused as such (the engine's
/// reason; HTTP 400 and the other 4xx). Failed is the rest, over HTTP only:
/// no connection, another 5xx, a stream that ended with an error event or
/// without its usage.
enum class Unserved { Busy, Unavailable, Invalid, Failed };
inline constexpr Unserved kUnservedKinds[] = {Unserved::Busy, Unserved::Unavailable,
                                              Unserved::Invalid, Unserved::Failed};

/// The kind's key in the JSON report ("refused_busy", "refused_unavailable",
/// "invalid", "failed") and its words in the text report.
const char *unservedKey(Unserved kind);
const char *unservedWords(Unserved kind);

/// A request that was not completed, and what the engine or server said.
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
  /// The requests not completed, by why (indexed by Unserved).
  std::array<std::vector<Rejection>, std::size(kUnservedKinds)> unserved;
  std::vector<Rejection> &of(Unserved kind) { return unserved[size_t(kind)]; }
  const std::vector<Rejection> &of(Unserved kind) const { return unserved[size_t(kind)]; }
  /// Completed or not: every request this outcome is of, unless one was lost.
  size_t settled() const;
  rt::EngineStats stats;
  std::vector<rt::ExpertLoad> expertLoad; ///< tokens per (MoE layer, expert)
  uint64_t collectiveBytes = 0;           ///< handed to the plan's collectives
  double seconds = 0;
  /// The KV pool that served the requests (in process, the options'; over
  /// HTTP, the server's): blocks, bytes per block, host-pool blocks.
  int64_t kvBlocks = 0, kvBytesPerBlock = 0, hostBlocks = 0;
};

/// Runs every request through a fresh engine. Rejected requests are
/// recorded and the rest keep being served; an engine failure is an error.
rt::Expected<Outcome> drive(const rt::LoadedPlan &plan, rt::Device &device,
                            const rt::EngineOptions &options,
                            const std::vector<rt::GenerationRequest> &requests, const Load &load,
                            bool progress);

} // namespace moe::bench

#endif
