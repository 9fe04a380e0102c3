//===- CudaStreams.h - streams and events of the CUDA backend ----*- C++ -*-===//
//
// HAL stream i is a non-blocking CUDA stream (none of them is the legacy
// default stream, so no stream waits for another by accident); a record
// and a wait are cudaEventRecord and cudaStreamWaitEvent, with the same
// meaning as the CPU backend's (a wait orders after the latest record
// enqueued before it; the host does not wait). Host work on stream 0, the
// caller's, runs as on the CPU backend: on the calling thread, once the
// stream's earlier work has finished (a synchronisation), and its status is
// returned at once. On other streams it runs through cudaLaunchHostFunc:
// in stream order, on a thread of the CUDA runtime, which may serialise the
// host work of different streams, so it must not block on another stream's
// host work and must not call CUDA.
//
// A stream that failed (host work returned an error, or a kernel faulted)
// skips the kernels and host work launched after its failure is known,
// but still records its events, so nothing waits for ever; synchronize()
// returns the error and clears it.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_BACKENDS_CUDA_CUDASTREAMS_H
#define MOE_RUNTIME_BACKENDS_CUDA_CUDASTREAMS_H

#include "moe/runtime/Hal.h"

#include <cuda_runtime_api.h>

namespace moe::rt::cuda_backend {

std::unique_ptr<Event> createEvent();
/// HAL stream `index` (0: the caller's).
std::unique_ptr<Stream> createStream(int index);

} // namespace moe::rt::cuda_backend

#endif
