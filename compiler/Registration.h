//===- Registration.h - register the project's dialects and passes -*- C++ -*-===//
#ifndef MOE_COMPILER_REGISTRATION_H
#define MOE_COMPILER_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace moe {
/// Adds every dialect a moe/plan module may contain (moe, func, arith, ...).
void registerAllDialects(mlir::DialectRegistry &registry);
/// Registers every implemented pass and pipeline of the project.
void registerAllPasses();
} // namespace moe

#endif
