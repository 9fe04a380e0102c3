//===- CpuStreams.h - streams and events of the CPU backend ------*- C++ -*-===//
//
// Stream 0 runs its work on the calling thread, at once (a one-stream plan
// pays nothing for streams); every other stream is a worker thread with a
// queue, so streams run concurrently. Events are real: a record completes
// when its stream reaches it, a wait blocks its stream (or, on stream 0,
// the caller) until the latest record enqueued before it has completed, as
// CUDA's cudaStreamWaitEvent does.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_BACKENDS_CPU_CPUSTREAMS_H
#define MOE_RUNTIME_BACKENDS_CPU_CPUSTREAMS_H

#include "moe/runtime/Hal.h"

namespace moe::rt::cpu_backend {

/// Runs one kernel call on this thread (kernels/cpu; CpuDevice.cpp).
Status runKernel(const KernelCall &call);

std::unique_ptr<Event> createEvent();
/// Stream 0: work runs on the calling thread as it is enqueued.
std::unique_ptr<Stream> createCallerStream();
/// Streams 1..: a worker thread each.
std::unique_ptr<Stream> createWorkerStream(int index);

} // namespace moe::rt::cpu_backend

#endif
