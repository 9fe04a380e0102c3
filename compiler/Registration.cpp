//===- Registration.cpp - register the project's dialects and passes ------===//
#include "compiler/Registration.h"

#include "compiler/conversion/Passes.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/transforms/Passes.h"
#include "dialects/moe/MoeDialect.h"
#include "dialects/plan/PlanDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

void moe::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::moe::MoeDialect, mlir::plan::PlanDialect,
                  mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
}

void moe::registerAllPasses() {
  registerMoeConversionPasses();
  registerMoeTransformsPasses();
  registerPipelines();
}
