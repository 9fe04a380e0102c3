//===- StreamOrder.h - the events a schedule on streams needs ---*- C++ -*-===//
//
// Given a stream for every launch and collective of a plan function, the
// plan.record / plan.wait pairs that order what must be ordered and no
// more: an op waits for another stream only when it touches rows that
// stream touched (one of them writing) and the stream's progress is not
// yet known to it through earlier events (vector clocks). Shared by the
// passes that put work on streams (moe-assign-streams,
// moe-schedule-overlap).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_TRANSFORMS_STREAMORDER_H
#define MOE_COMPILER_TRANSFORMS_STREAMORDER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace moe {

/// Sets the stream of each launch and collective of `fn` to
/// `streamOf(op)` (< `streams`; plan.output reads on stream 0) and inserts
/// the events before each op. `fn` must not have events yet.
mlir::LogicalResult orderStreams(mlir::func::FuncOp fn, size_t streams,
                                 llvm::function_ref<int64_t(mlir::Operation *)> streamOf);

} // namespace moe

#endif
