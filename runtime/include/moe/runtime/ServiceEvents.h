//===- ServiceEvents.h - what rank 0's service hands its engine -*- C++ -*-===//
//
// A server under mpirun runs one Engine on every rank; rank 0 alone takes
// requests. Before each step rank 0 sends the other ranks what it hands
// its engine (requests admitted, cancellations), so that every rank's
// engine makes the same batches, preemptions and prefix-cache hits; the
// engines' picks then agree inside the step (Engine.h). A step with
// nothing new sends an empty set, and an idle rank 0 sends one every
// kServiceHeartbeat, so that the other ranks' collective deadline
// (Collective.h) never trips on a quiet server and finds a stopped rank 0.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_SERVICEEVENTS_H
#define MOE_RUNTIME_SERVICEEVENTS_H

#include "moe/runtime/Collective.h"
#include "moe/runtime/Engine.h"

#include <chrono>
#include <cstdint>
#include <vector>

namespace moe::rt {

inline constexpr std::chrono::milliseconds kServiceHeartbeat{1000};

struct ServiceEvents {
  /// Submitted in this order (Engine::submit), before the cancellations.
  std::vector<GenerationRequest> submissions;
  /// Ranks holding different tokens (data-parallel attention): the data
  /// group (Session::dataGroup) whose ranks' engines run each submission
  /// (one rank each without --tp); the service numbers the
  /// submissions 0, 1, ... over the job's life, and `cancels` name those
  /// numbers. Empty when every rank runs every submission.
  std::vector<int32_t> owners;
  std::vector<int64_t> cancels;   ///< Engine::cancel, in this order
  bool cancelAll = false;         ///< then every pending request (a drain's grace ran out)
  bool stop = false;              ///< the service ends: no more steps
  /// After this step every rank reports its figures (gatherJobFigures);
  /// rank 0 asks once every kServiceHeartbeat.
  bool report = false;
  bool empty() const {
    return submissions.empty() && cancels.empty() && !cancelAll && !stop && !report;
  }
};

/// The events as 32-bit words, and back (a malformed list fails by name).
std::vector<int32_t> encodeEvents(const ServiceEvents &events);
Expected<ServiceEvents> decodeEvents(const std::vector<int32_t> &words);

/// What one rank's engine gave its requests in a step, for rank 0's
/// streams (ranks holding different tokens: each runs its own requests).
/// Ids are the service's numbers (ServiceEvents::owners).
struct ServiceOutputs {
  std::vector<ScoredPrompt> scored;
  std::vector<SampledToken> sampled;
  std::vector<GenerationResult> finished;
  bool empty() const { return scored.empty() && sampled.empty() && finished.empty(); }
};

/// The outputs as 32-bit words, and back (a malformed list fails by name).
std::vector<int32_t> encodeOutputs(const ServiceOutputs &outputs);
Expected<ServiceOutputs> decodeOutputs(const std::vector<int32_t> &words);

/// Every rank's `mine`, in rank order, on rank 0 (each rank calls it; the
/// others get an empty list).
Expected<std::vector<ServiceOutputs>> gatherOutputs(Collective &ranks, Device &device,
                                                    const ServiceOutputs &mine);

/// One rank's engine as rank 0's /metrics shows it.
struct RankFigures {
  int64_t kvBlocksUsed = 0;
  uint64_t expertRows = 0;      ///< rows its experts computed (its routing counts)
  uint64_t collectiveBytes = 0; ///< handed to the plan's collectives (Session)
  uint64_t collectiveNanoseconds = 0; ///< inside collectives (Collective::timeInCollectives)
  uint64_t picksReplaced = 0;   ///< EngineStats::picksOfRankZero
  int64_t running = 0, waiting = 0; ///< its engine's requests (EngineLoad)
};
struct JobFigures {
  std::vector<RankFigures> ranks;  ///< in rank order
  std::vector<ExpertLoad> experts; ///< routing counts summed over the ranks
};
/// Every rank's figures, and the job's routing counts (each rank calls it).
Expected<JobFigures> gatherJobFigures(Collective &ranks, Device &device, const Engine &engine);

/// Rank 0's `events` become every rank's (each rank calls it; what the
/// others pass is replaced). Staged through `device`'s host-visible memory
/// on its stream 0.
Status shareEvents(Collective &ranks, Device &device, ServiceEvents &events);

} // namespace moe::rt

#endif
