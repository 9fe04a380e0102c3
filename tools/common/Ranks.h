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

} // namespace moe::tools

#endif
