//===- CudaKernels.h - which plan kernels the CUDA backend runs --*- C++ -*-===//
#ifndef MOE_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H
#define MOE_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H

#include "moe/abi/KernelCall.h"
#include "moe/abi/Status.h"

#include <cuda_runtime_api.h>

namespace moe::rt::cuda_backend {

/// Whether launchKernel runs `kernel` with weights of `weightType` (F32 for
/// a kernel without weights): Device::supports.
bool runsKernel(Kernel kernel, DType weightType);

/// Whether its attention keeps a KV cache of `kvType`: Device::supportsKvCache.
bool keepsKvCache(DType kvType);

/// Enqueues one kernel call on `stream` (kernels/cuda); an error naming the
/// kernel for a call it does not run, or the launch's error.
Status launchKernel(const KernelCall &call, cudaStream_t stream);

} // namespace moe::rt::cuda_backend

#endif
