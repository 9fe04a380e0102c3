//===- Passes.h - transformation passes -------------------------*- C++ -*-===//
#ifndef MOE_COMPILER_TRANSFORMS_PASSES_H
#define MOE_COMPILER_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace moe {
#define GEN_PASS_DECL
#include "compiler/transforms/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

#endif
