//===- CudaError.h - CUDA runtime errors as Status --------------*- C++ -*-===//
#ifndef MOE_RUNTIME_BACKENDS_CUDA_CUDAERROR_H
#define MOE_RUNTIME_BACKENDS_CUDA_CUDAERROR_H

#include "moe/abi/Status.h"

#include <cuda_runtime_api.h>

#include <string>

namespace moe::rt::cuda_backend {

/// Ok, or "cuda: <what>: <the runtime's description> (<its name>)".
inline Status check(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return Status::ok();
  return Status::error(std::string("cuda: ") + what + ": " + cudaGetErrorString(err) + " (" +
                       cudaGetErrorName(err) + ")");
}

} // namespace moe::rt::cuda_backend

#endif
