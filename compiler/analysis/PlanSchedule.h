//===- PlanSchedule.h - a plan function as steps on streams -----*- C++ -*-===//
//
// The plan ops of a function, in program order, as the schedule checker of
// the runtime sees steps (moe/abi/Schedule.h): each launch with its
// stream and the buffers its memory effects read and write, each
// plan.record and plan.wait with its event. The schedule verifier and the
// memory planner work on this.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_ANALYSIS_PLANSCHEDULE_H
#define MOE_COMPILER_ANALYSIS_PLANSCHEDULE_H

#include "moe/abi/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>
#include <vector>

namespace moe {

struct PlanSchedule {
  std::vector<rt::ScheduleStep> steps;
  std::vector<mlir::Operation *> ops;           ///< the op of each step
  std::vector<mlir::Value> buffers;             ///< buffer id -> its value
  llvm::DenseMap<mlir::Value, int64_t> bufferId;
  /// Buffer id -> the buffer it is rows of (a plan.rows view's base; a
  /// buffer is its own), and which rows: part of parts (1 part: all).
  std::vector<int64_t> base;
  std::vector<rt::RowRange> rows;

  /// Whether buffers `a` and `b` may share bytes: views of one base whose
  /// rows intersect, or bases that `baseOverlap` says share bytes.
  bool overlap(int64_t a, int64_t b,
               const std::function<bool(int64_t, int64_t)> &baseOverlap) const;
};

/// The steps of `fn` (an op that takes a plan.rows view touches that
/// view's buffer id). Effects on values other than memrefs and KV-cache
/// layers (there are none today) are ignored.
PlanSchedule planSchedule(mlir::func::FuncOp fn);

} // namespace moe

#endif
