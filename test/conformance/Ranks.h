//===- Ranks.h - the job a conformance test runs in -------------*- C++ -*-===//
//
// Started by mpirun: the MPI collective; started alone: the local one. On
// ranks other than 0 GoogleTest prints only failures, each tagged with its
// rank, so a run under `mpirun -np 4` reads like one run.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TEST_CONFORMANCE_RANKS_H
#define MOE_TEST_CONFORMANCE_RANKS_H

#include "moe/runtime/Collective.h"

namespace moe::conformance {

/// The job's collective and a CPU stream to run it on (set up by main).
rt::Collective &ranks();
rt::Stream &stream();

} // namespace moe::conformance

#endif
