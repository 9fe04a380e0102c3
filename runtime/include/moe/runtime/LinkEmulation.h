//===- LinkEmulation.h - a slower link for the collectives ------*- C++ -*-===//
//
// On one machine the ranks talk over loopback, far faster than the links
// of a deployment (NVLink, InfiniBand), so overlap of communication with
// computation cannot be measured there. An emulated link holds every
// collective of a job for latency + wire bytes / bandwidth after it has
// run, on its stream: the stream waits as it would for a slow link, the
// other streams compute meanwhile. The wire bytes are the closed forms
// below, which the plan simulator also uses (one model of a link).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_LINKEMULATION_H
#define MOE_RUNTIME_LINKEMULATION_H

#include "moe/runtime/Collective.h"

#include <cstdint>
#include <memory>
#include <string>

namespace moe::rt {

/// A link: a latency per collective and a bandwidth in GB/s (1e9 bytes).
struct LinkModel {
  double latencyUs = 0, gbPerSecond = 0;
  /// Seconds a collective putting `wireBytes` on this rank's link takes.
  double seconds(uint64_t wireBytes) const;
  /// "LATENCY_US:GB_PER_S", e.g. "50:2" (latency >= 0, bandwidth > 0);
  /// the error says which part is wrong.
  static Expected<LinkModel> parse(const std::string &text);
  /// "50 us + bytes / 2 GB/s".
  std::string describe() const;
};

/// The bytes a ring all_reduce of `bytes` sends from each of `ranks` ranks:
/// 2 (ranks - 1) / ranks of them (reduce-scatter, then all-gather).
uint64_t allReduceWireBytes(uint64_t bytes, int ranks);
/// An all_gather of `bytes` per rank: each rank sends its part to the
/// ranks - 1 others (the ring's (ranks - 1) / ranks of the result).
uint64_t allGatherWireBytes(uint64_t bytes, int ranks);

/// `inner`'s collectives, each followed on its stream by a hold of
/// link.seconds(its wire bytes) (all_to_all_v: the bytes this rank sends to
/// other ranks).
std::unique_ptr<Collective> emulateLink(std::unique_ptr<Collective> inner,
                                        const LinkModel &link);

} // namespace moe::rt

#endif
