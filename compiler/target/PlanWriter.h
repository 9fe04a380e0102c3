//===- PlanWriter.h - plan dialect -> plan.moeplan + weights ----*- C++ -*-===//
#ifndef MOE_COMPILER_TARGET_PLANWRITER_H
#define MOE_COMPILER_TARGET_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "runtime/schema/plan_generated.h"

#include <string>

namespace moe {

struct PlanWriteOptions {
  std::string checkpointDir; ///< where the weights are read from
  std::string outputDir;     ///< created if missing
  std::string pipeline;      ///< recorded in the provenance
  moe::plan::DType kvDtype = moe::plan::DType::F32; ///< KV-cache element type
};

/// Serialises a module that went through moe-to-plan and moe-plan-memory:
/// streams its weights from the checkpoint into outputDir/weights-0.bin and
/// writes outputDir/plan.moeplan. Returns false with a one-line `error`.
bool writePlan(mlir::ModuleOp module, const PlanWriteOptions &options,
               std::string &error);

} // namespace moe

#endif
