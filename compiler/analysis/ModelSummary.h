//===- ModelSummary.h - what a moe module contains --------------*- C++ -*-===//
#ifndef MOE_COMPILER_ANALYSIS_MODELSUMMARY_H
#define MOE_COMPILER_ANALYSIS_MODELSUMMARY_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace moe {

/// Prints a short human-readable summary of a moe module, computed from the
/// IR itself: layers, routing, attention kind, parameter counts (total and
/// active per token), weight bytes per dtype and op counts.
void printModelSummary(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace moe

#endif
