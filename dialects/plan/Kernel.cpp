//===- Kernel.cpp - the plan dialect's view of Kernels.def ----------------===//
#include "dialects/plan/Kernel.h"

#include <iterator>

namespace mlir::plan {

namespace {
const KernelInfo kKernels[] = {
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params)                         \
  {#spelling, minIns, maxIns, outs, kv, KernelParams::Params},
#include "moe/abi/Kernels.def"
};
} // namespace

const KernelInfo &kernelInfo(Kernel kernel) { return kKernels[size_t(kernel)]; }

unsigned kernelCount() { return unsigned(std::size(kKernels)); }

std::optional<Kernel> symbolizeKernel(llvm::StringRef name) {
  for (size_t i = 0; i < std::size(kKernels); ++i)
    if (kKernels[i].name == name)
      return Kernel(i);
  return std::nullopt;
}

} // namespace mlir::plan
