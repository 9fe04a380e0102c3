//===- AssignStreams.cpp - round-robin streams with the events they need -===//
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/StreamOrder.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace moe {
#define GEN_PASS_DEF_ASSIGNSTREAMSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

struct AssignStreamsPass : ::moe::impl::AssignStreamsPassBase<AssignStreamsPass> {
  using AssignStreamsPassBase::AssignStreamsPassBase;

  void runOnOperation() override {
    if (streams < 1 || streams > 256) {
      getOperation().emitError() << "moe-assign-streams: streams must be in [1, 256], got "
                                 << static_cast<int64_t>(streams);
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp fn) {
      if (failed(assign(fn)))
        signalPassFailure();
    });
  }

  LogicalResult assign(func::FuncOp fn) {
    WalkResult used = fn.walk([&](Operation *op) {
      auto launch = dyn_cast<plan::LaunchOp>(op);
      if ((launch && launch.getStream() != 0) || isa<plan::RecordOp, plan::WaitOp>(op)) {
        op->emitError() << "moe-assign-streams: the function already uses streams";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (used.wasInterrupted())
      return failure();
    // Launches go round the streams.
    const size_t n = size_t(int64_t(streams));
    size_t launches = 0;
    return ::moe::orderStreams(fn, n, [&](Operation *op) {
      return isa<plan::LaunchOp>(op) ? int64_t(launches++ % n) : 0;
    });
  }
};

} // namespace
