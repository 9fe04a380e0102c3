//===- PlanWriter.h - plan dialect -> plan.moeplan + weights ----*- C++ -*-===//
#ifndef MOE_COMPILER_TARGET_PLANWRITER_H
#define MOE_COMPILER_TARGET_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "abi/schema/plan_generated.h"

#include <atomic>
#include <string>

namespace moe {

struct PlanWriteOptions {
  std::string checkpointDir; ///< where the weights are read from
  std::string outputDir;     ///< created, or replaced in one rename
  std::string pipeline;      ///< recorded in the provenance
  moe::plan::DType kvDtype = moe::plan::DType::F32; ///< KV-cache element type
  /// When set (by a signal handler), writing stops and the target is left
  /// as it was.
  const std::atomic<bool> *cancelled = nullptr;
  /// The module was imported from config.json alone: write the plan's
  /// layout (every tensor's place and size) but no weights, a plan to
  /// inspect and simulate that the runtime refuses to run.
  bool shapeOnly = false;
};

/// Serialises a module that went through moe-to-plan and moe-plan-memory:
/// streams its weights from the checkpoint into weights-0.bin and writes
/// plan.moeplan, in a staging directory that then replaces outputDir in one
/// rename (StagedDirectory.h). Returns false with a one-line `error`; the
/// old outputDir is then untouched.
bool writePlan(mlir::ModuleOp module, const PlanWriteOptions &options,
               std::string &error);

} // namespace moe

#endif
