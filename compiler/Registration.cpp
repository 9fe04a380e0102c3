//===- Registration.cpp - register the project's dialects and passes ------===//
#include "compiler/Registration.h"

#include "dialects/moe/MoeDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

void moe::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::moe::MoeDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
}

// The project's passes are registered here as they are implemented (see
// compiler/transforms/Passes.td once it exists); none is listed before it works.
void moe::registerAllPasses() {}
