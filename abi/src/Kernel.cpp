//===- Kernel.cpp - the kernels a plan may launch -------------------------===//
#include "moe/abi/Kernel.h"

#include <iterator>

namespace moe::rt {

namespace {
const KernelInfo kKernels[] = {
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params)                         \
  {#spelling, minIns, maxIns, outs, kv},
#include "moe/abi/Kernels.def"
};
} // namespace

const KernelInfo *kernelInfo(Kernel kernel) {
  return size_t(kernel) < std::size(kKernels) ? &kKernels[size_t(kernel)] : nullptr;
}

} // namespace moe::rt
