//===- moe-opt.cpp - mlir-opt for the moe project -------------------------===//
//
// Parses, verifies, transforms and prints moe/plan IR. Every dialect and
// implemented pass of the project is registered here, plus MLIR's generic
// transforms (canonicalize, cse, ...), so the usual mlir-opt flags work.
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  moe::registerAllDialects(registry);
  moe::registerAllPasses();
  mlir::registerTransformsPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "moe optimizer: MoE dialects and passes\n", registry));
}
