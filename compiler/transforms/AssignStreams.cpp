//===- AssignStreams.cpp - round-robin streams with the events they need -===//
#include "compiler/analysis/PlanSchedule.h"
#include "compiler/transforms/Passes.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <tuple>

namespace moe {
#define GEN_PASS_DEF_ASSIGNSTREAMSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

/// One earlier access to a buffer: its stream, how many steps (launches,
/// the output) that stream had made including it, and whether it wrote.
struct Access {
  int stream;
  uint32_t count;
  bool write;
};

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
    ::moe::PlanSchedule s = ::moe::planSchedule(fn);
    for (Operation *op : s.ops) {
      auto launch = dyn_cast<plan::LaunchOp>(op);
      if ((launch && launch.getStream() != 0) || isa<plan::RecordOp, plan::WaitOp>(op))
        return op->emitError() << "moe-assign-streams: the function already uses streams";
    }
    const size_t n = size_t(int64_t(streams));
    // seen[a][b]: how many steps of stream b stream a is ordered after
    // (seen[a][a]: its own steps so far), as vector clocks.
    std::vector<std::vector<uint32_t>> seen(n, std::vector<uint32_t>(n, 0));
    std::vector<std::vector<Access>> accesses(s.buffers.size());
    OpBuilder b(fn.getContext());
    size_t launches = 0;
    for (size_t i = 0; i < s.ops.size(); ++i) {
      Operation *op = s.ops[i];
      const auto &step = s.steps[i];
      // Launches go round the streams; the output is read on stream 0.
      const size_t stream = isa<plan::LaunchOp>(op) ? launches++ % n : 0;
      // For each other stream, the last of its steps this one conflicts with.
      std::vector<uint32_t> need(n, 0);
      auto touch = [&](int64_t buffer, bool write) {
        for (const Access &a : accesses[size_t(buffer)])
          if (size_t(a.stream) != stream && (write || a.write))
            need[size_t(a.stream)] = std::max(need[size_t(a.stream)], a.count);
      };
      for (int64_t r : step.reads)
        touch(r, false);
      for (int64_t w : step.writes)
        touch(w, true);
      // Wait for the streams not yet ordered before this op, first for the
      // one whose own order covers most of the others (often all of them).
      b.setInsertionPoint(op);
      for (;;) {
        std::vector<size_t> open;
        for (size_t t = 0; t < n; ++t)
          if (need[t] > seen[stream][t])
            open.push_back(t);
        if (open.empty())
          break;
        size_t best = open.front(), bestCover = 0;
        for (size_t t : open) {
          size_t cover = 0;
          for (size_t u : open)
            cover += seen[t][u] >= need[u];
          if (cover > bestCover)
            std::tie(best, bestCover) = std::pair(t, cover);
        }
        auto event = b.create<plan::RecordOp>(op->getLoc(), plan::EventType::get(b.getContext()),
                                              b.getI64IntegerAttr(int64_t(best)));
        b.create<plan::WaitOp>(op->getLoc(), event, b.getI64IntegerAttr(int64_t(stream)));
        for (size_t u = 0; u < n; ++u)
          seen[stream][u] = std::max(seen[stream][u], seen[best][u]);
      }
      if (auto launch = dyn_cast<plan::LaunchOp>(op))
        launch.setStreamAttr(b.getI64IntegerAttr(int64_t(stream)));
      ++seen[stream][stream]; // the output counts too: a later writer waits for it
      for (int64_t r : step.reads)
        accesses[size_t(r)].push_back({int(stream), seen[stream][stream], false});
      for (int64_t w : step.writes)
        accesses[size_t(w)].push_back({int(stream), seen[stream][stream], true});
    }
    return success();
  }
};

} // namespace
