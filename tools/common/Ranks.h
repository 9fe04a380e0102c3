//===- Ranks.h - joining the job a tool was launched in ---------*- C++ -*-===//
//
// A tool started by mpirun joins the MPI job (before it loads the plan: a
// rank maps only its own weights); started alone it runs as the one rank.
// Before the first step every rank checks that all loaded the same plan and
// that the job has as many ranks as the plan has programs.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_RANKS_H
#define MOE_TOOLS_COMMON_RANKS_H

#include "moe/runtime/MpiCollective.h"
#include "moe/runtime/Plan.h"

#include <sys/resource.h>

#include <cstdio>
#include <string>

namespace moe::tools {

/// The job's collective: MPI's under mpirun, else the local one.
inline rt::Expected<std::unique_ptr<rt::Collective>> joinJob(const std::string &tool) {
  if (rt::launchedByMpi())
    return rt::createMpiCollective(tool);
  return rt::createLocalCollective();
}

/// Every rank of `ranks` runs `plan`, or the one-line reason they cannot.
inline rt::Status agreeOnPlan(rt::Collective &ranks, const rt::LoadedPlan &plan,
                              rt::Device &device) {
  return rt::agreeOnPlan(ranks, device, plan.checksum(), plan.ranks());
}

/// Every rank runs the same requests and rank 0 reports: the others' standard
/// output goes to /dev/null (their errors still reach standard error).
inline rt::Status quietUnlessRankZero(const rt::Collective &ranks) {
  if (ranks.rank() != 0 && !std::freopen("/dev/null", "w", stdout))
    return rt::Status::error("cannot silence the standard output of rank " +
                             std::to_string(ranks.rank()));
  return rt::Status::ok();
}

/// With several ranks, one line per rank (rank 0 gets them; every rank must
/// call it): the weights and arena its program states, its peak resident
/// memory, so that a sharded plan's ranks can be seen to hold their shard
/// and not the whole model, and the bytes it handed to the plan's
/// collectives (`collectiveBytes`, its own).
inline rt::Expected<std::string> rankReport(rt::Collective &ranks, rt::Device &device,
                                            const rt::LoadedPlan &plan,
                                            uint64_t collectiveBytes) {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  // KiB, then the bytes as two words (31 low bits, the rest).
  auto all = rt::gatherWords(ranks, device,
                             {int32_t(usage.ru_maxrss), int32_t(collectiveBytes & 0x7fffffffu),
                              int32_t(collectiveBytes >> 31)});
  if (!all)
    return all.status();
  std::string lines;
  const auto *programs = plan.plan().programs();
  for (int r = 0; r < ranks.size(); ++r) {
    const auto *prog = programs->Get(uint32_t(r));
    const int32_t *w = &(*all)[3 * size_t(r)];
    const uint64_t bytes = uint64_t(uint32_t(w[1])) | uint64_t(uint32_t(w[2])) << 31;
    char line[200];
    std::snprintf(line, sizeof line,
                  "rank %d: weights %.1f MiB, arena %.1f MiB, peak resident %.1f MiB, "
                  "collectives %.2f MiB (%llu bytes)\n",
                  r, double(prog->weight_bytes()) / 1048576.0,
                  double(prog->arena_bytes()) / 1048576.0, w[0] / 1024.0,
                  double(bytes) / 1048576.0, (unsigned long long)bytes);
    lines += line;
  }
  return lines;
}

} // namespace moe::tools

#endif
