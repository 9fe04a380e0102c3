//===- Kernel.h - the plan dialect's view of Kernels.def --------*- C++ -*-===//
//
// The kernels a `plan.launch` may name, from the one list
// (abi/include/moe/abi/Kernels.def): the enum's values are the plan
// schema's op codes, so the writer converts by value.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECTS_PLAN_KERNEL_H
#define MOE_DIALECTS_PLAN_KERNEL_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace mlir::plan {

enum class Kernel : uint8_t {
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params) Name,
#include "moe/abi/Kernels.def"
};

/// Which parameter attribute a kernel takes (Kernels.def's last column).
enum class KernelParams : uint8_t {
  NONE,
  RmsNormParams,
  RouterParams,
  AttentionParams,
  MlaParams,
  ExpertsParams,
  DispatchParams
};

struct KernelInfo {
  llvm::StringRef name; ///< "rms_norm"
  unsigned minIns, maxIns, outs;
  bool kv;
  KernelParams params;
};

const KernelInfo &kernelInfo(Kernel kernel);
/// How many kernels Kernels.def lists (Kernel values are 0 .. count - 1).
unsigned kernelCount();
/// The kernel spelled `name`, if Kernels.def has one.
std::optional<Kernel> symbolizeKernel(llvm::StringRef name);

} // namespace mlir::plan

#endif
