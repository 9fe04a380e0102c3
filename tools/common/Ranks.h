//===- Ranks.h - joining the job a tool was launched in ---------*- C++ -*-===//
//
// A tool started by mpirun joins the MPI job and checks, before the first
// step, that every rank loaded the same plan and that the job has as many
// ranks as the plan has programs; started alone it runs as the one rank.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_RANKS_H
#define MOE_TOOLS_COMMON_RANKS_H

#include "moe/runtime/MpiCollective.h"
#include "moe/runtime/Plan.h"

namespace moe::tools {

/// The job's collective (local when not launched by mpirun), agreed on
/// `plan`; or the one-line reason the ranks cannot run it together.
inline rt::Expected<std::unique_ptr<rt::Collective>>
joinRanks(const std::string &tool, const rt::LoadedPlan &plan, rt::Stream &stream) {
  std::unique_ptr<rt::Collective> ranks;
  if (rt::launchedByMpi()) {
    auto mpi = rt::createMpiCollective(tool);
    if (!mpi)
      return mpi.status();
    ranks = mpi.take();
  } else {
    ranks = rt::createLocalCollective();
  }
  if (rt::Status st = rt::agreeOnPlan(*ranks, stream, plan.checksum(),
                                      int(plan.plan().programs()->size()));
      !st)
    return st;
  return ranks;
}

} // namespace moe::tools

#endif
