//===- CudaDevice.h - the CUDA backend, for the registry ---------*- C++ -*-===//
//
// Compiled only in a build with MOE_CUDA (docs/design-cuda.md); tools reach
// it as `--device cuda` through runtime/src/Registry.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H
#define MOE_RUNTIME_BACKENDS_CUDA_CUDADEVICE_H

#include "moe/runtime/Hal.h"

#include <string>

namespace moe::rt {

/// "" when a CUDA device can be created here, else why not, starting
/// "no GPU" when the runtime finds none ("no GPU (cudaGetDeviceCount: ...)").
std::string cudaUnavailable();

/// The first visible GPU (CUDA_VISIBLE_DEVICES chooses it).
Expected<std::unique_ptr<Device>> createCudaDevice();

} // namespace moe::rt

#endif
