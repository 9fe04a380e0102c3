//===- Kernel.cpp - what each plan kernel takes ---------------------------===//
#include "moe/runtime/Kernel.h"

#include <iterator>

namespace moe::rt {

namespace {
const KernelInfo kKernels[] = {
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params)                         \
  {#spelling, minIns, maxIns, outs, kv, plan::OpParams::Params},
#include "moe/runtime/Kernels.def"
};
// The generated OpCode enum has one value per row, in row order.
static_assert(std::size(kKernels) == size_t(plan::OpCode::MAX) + 1,
              "plan.fbs's OpCode and Kernels.def disagree: rerun cmake");
} // namespace

const KernelInfo *kernelInfo(plan::OpCode op) {
  return size_t(op) < std::size(kKernels) ? &kKernels[size_t(op)] : nullptr;
}

int kvLayerOf(const plan::Instruction &inst) {
  if (auto *a = inst.params_as_AttentionParams())
    return a->layer();
  if (auto *m = inst.params_as_MlaParams())
    return m->layer();
  return -1;
}

} // namespace moe::rt
