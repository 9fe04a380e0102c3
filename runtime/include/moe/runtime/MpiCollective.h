//===- MpiCollective.h - collectives over MPI -------------------*- C++ -*-===//
//
// The collective of a job started by `mpirun` (Open MPI): ranks and size
// come from the MPI environment. Lives in its own library,
// moe_comm_mpi, so that single-rank programs do not load MPI.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_MPICOLLECTIVE_H
#define MOE_RUNTIME_MPICOLLECTIVE_H

#include "moe/runtime/Collective.h"

namespace moe::rt {

/// Whether an MPI launcher started this process (its environment names a
/// rank).
bool launchedByMpi();

/// Joins the job (MPI_Init on first use; MPI_Finalize when the collective
/// is destroyed). When the launcher ends the job because another rank
/// failed, it sends this process SIGTERM: the process then prints one line,
/// "<program>: rank R of N: stopped: the job was ended (another rank
/// failed or was killed)", and exits with status 1 instead of dying
/// silently. Errors of MPI calls come back as Status, naming the call.
/// A collective that waits longer than `deadline` for its peers fails with
/// one line naming the collective and the ranks that did not answer (a
/// stopped or lost peer); the caller then abandons the job.
Expected<std::unique_ptr<Collective>>
createMpiCollective(const std::string &program,
                    std::chrono::milliseconds deadline = kDefaultCollectiveDeadline);

} // namespace moe::rt

#endif
