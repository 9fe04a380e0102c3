//===- Importer.h - Hugging Face checkpoint -> moe dialect ------*- C++ -*-===//
#ifndef MOE_COMPILER_IMPORT_IMPORTER_H
#define MOE_COMPILER_IMPORT_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace moe {

struct ImportOptions {
  /// Build the module from config.json alone: no tensor is read or checked,
  /// dtypes come from the config's torch_dtype (and quantization_config).
  bool shapeOnly = false;
};

/// Imports the checkpoint directory `dir` (config.json plus model.safetensors
/// or a sharded model.safetensors.index.json) into a verified moe module with
/// one function `forward(tokens, positions) -> logits`. On bad input returns
/// null and sets `error` to one line naming the file (and tensor).
mlir::OwningOpRef<mlir::ModuleOp> importCheckpoint(mlir::MLIRContext &context,
                                                   const std::string &dir,
                                                   const ImportOptions &options,
                                                   std::string &error);

} // namespace moe

#endif
