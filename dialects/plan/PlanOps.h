//===- PlanOps.h - ops and types of the plan dialect ------------*- C++ -*-===//
#ifndef MOE_DIALECTS_PLAN_PLANOPS_H
#define MOE_DIALECTS_PLAN_PLANOPS_H

#include "dialects/moe/MoeDialect.h" // the router enums
#include "dialects/plan/Kernel.h"
#include "dialects/plan/PlanDialect.h"
#include "dialects/plan/PlanEnums.h.inc"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_TYPEDEF_CLASSES
#include "dialects/plan/PlanTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.h.inc"

namespace mlir::plan {
/// Whether `v` is a buffer led by the step's tokens (dimension 0 dynamic):
/// what micro-batches split into rows.
bool isTokenLed(Value v);
} // namespace mlir::plan


#endif
