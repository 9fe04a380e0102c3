//===- Passes.h - conversion passes -----------------------------*- C++ -*-===//
#ifndef MOE_COMPILER_CONVERSION_PASSES_H
#define MOE_COMPILER_CONVERSION_PASSES_H

#include "dialects/plan/PlanDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace moe {
#define GEN_PASS_DECL
#include "compiler/conversion/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "compiler/conversion/Passes.h.inc"
} // namespace moe

#endif
