//===- PlanOps.h - ops and types of the plan dialect ------------*- C++ -*-===//
#ifndef MOE_DIALECTS_PLAN_PLANOPS_H
#define MOE_DIALECTS_PLAN_PLANOPS_H

#include "dialects/plan/PlanDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_TYPEDEF_CLASSES
#include "dialects/plan/PlanTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.h.inc"

namespace mlir::plan {
/// Inputs and outputs a kernel takes: {min ins, max ins, outs, needs kv}.
struct KernelSignature {
  unsigned minIns, maxIns, outs;
  bool kv;
};
/// The signature of `kernel`, or null if no such kernel exists.
const KernelSignature *lookupKernel(llvm::StringRef kernel);
} // namespace mlir::plan

#endif
