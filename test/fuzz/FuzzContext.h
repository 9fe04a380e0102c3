//===- FuzzContext.h - the MLIR context of the compiler-side targets -*- C++ -*-===//
#ifndef MOE_TEST_FUZZ_FUZZCONTEXT_H
#define MOE_TEST_FUZZ_FUZZCONTEXT_H

#include "mlir/IR/MLIRContext.h"

namespace moe::fuzz {

/// One context for the process: the moe, plan and func dialects loaded,
/// diagnostics swallowed (the targets look at results, not messages).
mlir::MLIRContext &context();

} // namespace moe::fuzz

#endif
