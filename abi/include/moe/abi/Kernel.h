//===- Kernel.h - the kernels a plan may launch -----------------*- C++ -*-===//
//
// The rows of Kernels.def, the one kernel list, as an enum and as data the
// loader and the backends check calls against. The enum's values are the
// plan format's op codes.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_KERNEL_H
#define MOE_RUNTIME_KERNEL_H

#include <cstdint>

namespace moe::rt {

enum class Kernel : uint8_t {
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params) Name,
#include "moe/abi/Kernels.def"
};

struct KernelInfo {
  const char *name;        ///< as the plan dialect spells it: "rms_norm"
  unsigned minIns, maxIns; ///< inputs
  unsigned outs;           ///< outputs
  bool kv;                 ///< takes a KV-cache layer
};

/// The row of `kernel`, or null when `kernel` is no row of the list.
const KernelInfo *kernelInfo(Kernel kernel);

} // namespace moe::rt

#endif
