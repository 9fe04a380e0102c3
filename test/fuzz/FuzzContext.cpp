//===- FuzzContext.cpp - the MLIR context of the compiler-side targets ----===//
#include "test/fuzz/FuzzContext.h"
#include "compiler/Registration.h"

#include "mlir/IR/Diagnostics.h"

mlir::MLIRContext &moe::fuzz::context() {
  static mlir::MLIRContext *context = [] {
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    auto *c = new mlir::MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->getDiagEngine().registerHandler([](mlir::Diagnostic &) { return mlir::success(); });
    return c;
  }();
  return *context;
}
