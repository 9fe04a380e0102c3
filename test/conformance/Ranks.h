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

/// The job's collective, the device under test (the CPU backend for now)
/// and its stream 0 (set up by main).
rt::Collective &ranks();
rt::Device &device();
rt::Stream &stream();

} // namespace moe::conformance

#endif
