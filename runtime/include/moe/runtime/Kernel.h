//===- Kernel.h - what each plan kernel takes -------------------*- C++ -*-===//
//
// The rows of Kernels.def, the one kernel list, as data the loader and the
// backends check instructions against.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_KERNEL_H
#define MOE_RUNTIME_KERNEL_H

#include "runtime/schema/plan_generated.h"

namespace moe::rt {

struct KernelInfo {
  const char *name;        ///< as the plan dialect spells it: "rms_norm"
  unsigned minIns, maxIns; ///< inputs
  unsigned outs;           ///< outputs
  bool kv;                 ///< takes a KV-cache layer
  plan::OpParams params;   ///< its parameter table, NONE when it has none
};

/// The row of `op`, or null when `op` is no kernel of the list.
const KernelInfo *kernelInfo(plan::OpCode op);

/// The KV-cache layer `inst` reads and writes (its attention or MLA
/// parameters name it), -1 for none.
int kvLayerOf(const plan::Instruction &inst);

} // namespace moe::rt

#endif
