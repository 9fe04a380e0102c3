//===- RankPrograms.h - what the sharding passes share ----------*- C++ -*-===//
//
// The passes that split a plan over ranks (moe-shard-experts,
// moe-place-experts, moe-shard-tensors) all start from the rank programs
// moe-replicate-ranks made and end a rank's partial result with an
// all_reduce.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_TRANSFORMS_RANKPROGRAMS_H
#define MOE_COMPILER_TRANSFORMS_RANKPROGRAMS_H

#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace moe {

/// The module's rank programs, in rank order; an error naming `pass` and
/// its `option` when there are not `ranks` of them.
mlir::FailureOr<llvm::SmallVector<mlir::func::FuncOp>>
rankPrograms(mlir::ModuleOp module, llvm::StringRef pass, llvm::StringRef option, int64_t ranks);

/// Adds `plan.collective all_reduce` of `l`'s first output, in place, right
/// after `l` on its stream: each rank holds a part of the sum, among the
/// ranks of `group` (null: every rank).
void allReduceAfter(mlir::plan::LaunchOp l, mlir::plan::GroupAttr group = {});
/// The same after collective `c` (its first output).
void allReduceAfter(mlir::plan::CollectiveOp c, mlir::plan::GroupAttr group);

} // namespace moe

#endif
