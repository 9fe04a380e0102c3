//===- ScheduleOverlap.cpp - micro-batches whose collectives overlap ------===//
//
// two-batch: every launch and collective is cloned per micro-batch on
// plan.rows views; the program is cut after each collective into
// segments, each segment runs part 0, 1, ... in turn, launches on stream
// 0 and collectives on stream 1, so that part k's collective runs while
// part k + 1 computes (and part k's own work that does not need it).
// StreamOrder adds the events the effects need.
//
// The row exchange of data-parallel attention (all_to_all_v out, the
// rank's expert_rows, all_to_all_v back) splits as any collective: part
// k's exchange sends part k's rows into part k of the received buffers
// (scratch per part: those buffers are token-led, their parts disjoint),
// as SGLang's two-batch overlap and DeepEP do.
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/StreamOrder.h"
#include "dialects/plan/PlanOps.h"
#include "moe/abi/PlanFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

namespace moe {
#define GEN_PASS_DEF_SCHEDULEOVERLAPPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

struct ScheduleOverlapPass : ::moe::impl::ScheduleOverlapPassBase<ScheduleOverlapPass> {
  using ScheduleOverlapPassBase::ScheduleOverlapPassBase;

  void runOnOperation() override {
    if (policy != "none" && policy != "two-batch") {
      getOperation().emitError()
          << "moe-schedule-overlap: policy must be none or two-batch, got '" << policy
          << "' (moe-compile --overlap auto chooses between them by simulating the plans)";
      return signalPassFailure();
    }
    if (microBatches < 2 || microBatches > ::moe::rt::kMaxMicroBatches) {
      getOperation().emitError() << "moe-schedule-overlap: micro-batches must be in [2, "
                                 << ::moe::rt::kMaxMicroBatches << "], got "
                                 << static_cast<int64_t>(microBatches);
      return signalPassFailure();
    }
    if (policy == "none")
      return;
    getOperation().walk([&](func::FuncOp fn) {
      if (failed(split(fn)))
        signalPassFailure();
    });
  }

  /// Why `op` cannot be split, or success.
  LogicalResult refuse(Operation *op) {
    const char *pass = "moe-schedule-overlap: ";
    if (isa<plan::RecordOp, plan::WaitOp>(op))
      return op->emitError() << pass << "the function already has events (run it before "
                                        "moe-assign-streams, once)";
    if (isa<plan::RowsOp>(op))
      return op->emitError() << pass << "the function is already split into micro-batches";
    if (auto launch = dyn_cast<plan::LaunchOp>(op)) {
      if (launch.getStream() != 0)
        return op->emitError() << pass << "the function already uses streams";
      if (auto r = dyn_cast_or_null<plan::RouterParamsAttr>(launch.getParamsAttr());
          r && r.getPolicy() != mlir::moe::RoutingPolicy::token_choice)
        return op->emitError() << pass << "routing by " 
                               << mlir::moe::stringifyRoutingPolicy(r.getPolicy())
                               << " depends on every token of the step, so micro-batches would "
                                  "route differently; compile with --routing token_choice or "
                                  "without overlap";
    }
    if (auto c = dyn_cast<plan::CollectiveOp>(op)) {
      if (c.getStream() != 0)
        return op->emitError() << pass << "the function already uses streams";
      if (c.getKind() == plan::CollectiveKind::all_gather)
        return op->emitError() << pass << "'all_gather' is not split into micro-batches; "
                                          "all_reduce and all_to_all_v are";
    }
    return success();
  }

  /// Moves the work of each segment that does not depend on the
  /// collective before it (a shared expert beside the routed experts'
  /// rows) into that collective's segment, right after it: the part's
  /// own computation overlaps its collective (issued first: stream 0
  /// issues in program order). An op stays if it touches a buffer the
  /// collective touches or one that an op staying before it touches.
  static void hoistIndependentWork(std::vector<std::vector<Operation *>> &segments) {
    for (size_t j = 1; j < segments.size(); ++j) {
      Operation *collective = segments[j - 1].back();
      // Buffers and KV layers (weights are only read: sharing them orders
      // nothing).
      llvm::DenseSet<Value> held;
      auto hold = [&](Operation *op) {
        for (Value v : op->getOperands())
          if (!v.getDefiningOp<plan::WeightOp>())
            held.insert(v);
      };
      hold(collective);
      std::vector<Operation *> stay, moved;
      for (Operation *op : segments[j]) {
        bool independent = !isa<plan::CollectiveOp>(op) &&
                           llvm::none_of(op->getOperands(), [&](Value v) { return held.count(v); });
        if (independent) {
          moved.push_back(op);
          continue;
        }
        hold(op);
        stay.push_back(op);
      }
      segments[j - 1].insert(segments[j - 1].end(), moved.begin(), moved.end());
      segments[j] = std::move(stay);
    }
  }

  LogicalResult split(func::FuncOp fn) {
    const int64_t parts = microBatches;
    // The work, cut after each collective into segments.
    std::vector<std::vector<Operation *>> segments(1);
    Operation *output = nullptr;
    for (Operation &op : fn.getBody().front()) {
      if (failed(refuse(&op)))
        return failure();
      if (isa<plan::OutputOp>(op))
        output = &op;
      if (!isa<plan::LaunchOp, plan::CollectiveOp>(op))
        continue;
      segments.back().push_back(&op);
      if (isa<plan::CollectiveOp>(op))
        segments.emplace_back();
    }
    if (!output)
      return fn.emitError() << "moe-schedule-overlap: the function has no plan.output";
    hoistIndependentWork(segments);
    // The views of a token-led buffer, made together after it.
    llvm::DenseMap<Value, SmallVector<Value>> views;
    OpBuilder b(fn.getContext());
    auto view = [&](Value v, int64_t k) -> Value {
      if (!plan::isTokenLed(v))
        return v;
      auto [it, added] = views.try_emplace(v);
      if (added) {
        b.setInsertionPointAfterValue(v);
        for (int64_t p = 0; p < parts; ++p)
          it->second.push_back(b.create<plan::RowsOp>(v.getLoc(), v.getType(), v,
                                                      b.getI64IntegerAttr(p),
                                                      b.getI64IntegerAttr(parts)));
      }
      return it->second[size_t(k)];
    };
    // Each segment, part after part, before the output.
    std::vector<Operation *> originals;
    for (const auto &segment : segments)
      for (int64_t k = 0; k < parts; ++k)
        for (Operation *op : segment) {
          IRMapping map;
          for (Value v : op->getOperands())
            map.map(v, view(v, k));
          b.setInsertionPoint(output);
          b.clone(*op, map);
          if (k == 0)
            originals.push_back(op);
        }
    for (Operation *op : llvm::reverse(originals))
      op->erase();
    return ::moe::orderStreams(fn, 2, [](Operation *op) {
      return isa<plan::CollectiveOp>(op) ? int64_t(1) : int64_t(0);
    });
  }
};

} // namespace
