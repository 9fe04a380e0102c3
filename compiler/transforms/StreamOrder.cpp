//===- StreamOrder.cpp - the events a schedule on streams needs -----------===//
#include "compiler/transforms/StreamOrder.h"
#include "compiler/analysis/PlanSchedule.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/IR/Builders.h"

#include <algorithm>
#include <tuple>

using namespace mlir;

namespace moe {

namespace {

/// One earlier access to a buffer's rows: its stream, how many steps
/// (launches, collectives, the output) that stream had made including it,
/// whether it wrote, and which buffer id (rows) it touched.
struct Access {
  int stream;
  uint32_t count;
  bool write;
  int64_t buffer;
};

} // namespace

LogicalResult orderStreams(func::FuncOp fn, size_t n,
                           llvm::function_ref<int64_t(Operation *)> streamOf) {
  PlanSchedule s = planSchedule(fn);
  for (Operation *op : s.ops)
    if (isa<plan::RecordOp, plan::WaitOp>(op))
      return op->emitError() << "the function already has events";
  // seen[a][b]: how many steps of stream b stream a is ordered after
  // (seen[a][a]: its own steps so far), as vector clocks.
  std::vector<std::vector<uint32_t>> seen(n, std::vector<uint32_t>(n, 0));
  // Per stream, its steps in order: the op, and its clock just after it.
  std::vector<std::vector<std::pair<Operation *, std::vector<uint32_t>>>> steps(n);
  // The event recorded right after an op, when one is.
  llvm::DenseMap<Operation *, Value> recorded;
  // Per base buffer, the accesses to its rows.
  std::vector<std::vector<Access>> accesses(s.buffers.size());
  OpBuilder b(fn.getContext());
  for (size_t i = 0; i < s.ops.size(); ++i) {
    Operation *op = s.ops[i];
    const auto &step = s.steps[i];
    const size_t stream = isa<plan::OutputOp>(op) ? 0 : size_t(streamOf(op));
    // For each other stream, the last of its steps this one conflicts with.
    std::vector<uint32_t> need(n, 0);
    auto touch = [&](int64_t buffer, bool write) {
      for (const Access &a : accesses[size_t(s.base[size_t(buffer)])])
        if (size_t(a.stream) != stream && (write || a.write) &&
            s.rows[size_t(a.buffer)].intersects(s.rows[size_t(buffer)]))
          need[size_t(a.stream)] = std::max(need[size_t(a.stream)], a.count);
    };
    for (int64_t r : step.reads)
      touch(r, false);
    for (int64_t w : step.writes)
      touch(w, true);
    // Wait for the streams not yet ordered before this op, each for an
    // event recorded right after the step it needs (not later: the work
    // the stream took on since may run on), first for the one whose
    // clock there covers most of the others.
    for (;;) {
      std::vector<size_t> open;
      for (size_t t = 0; t < n; ++t)
        if (need[t] > seen[stream][t])
          open.push_back(t);
      if (open.empty())
        break;
      size_t best = open.front(), bestCover = 0;
      for (size_t t : open) {
        const std::vector<uint32_t> &clock = steps[t][need[t] - 1].second;
        size_t cover = 0;
        for (size_t u : open)
          cover += clock[u] >= need[u];
        if (cover > bestCover)
          std::tie(best, bestCover) = std::pair(t, cover);
      }
      auto &[after, clock] = steps[best][need[best] - 1];
      Value &event = recorded[after];
      if (!event) {
        b.setInsertionPointAfter(after);
        event = b.create<plan::RecordOp>(after->getLoc(), plan::EventType::get(b.getContext()),
                                         b.getI64IntegerAttr(int64_t(best)));
      }
      b.setInsertionPoint(op);
      b.create<plan::WaitOp>(op->getLoc(), event, b.getI64IntegerAttr(int64_t(stream)));
      for (size_t u = 0; u < n; ++u)
        seen[stream][u] = std::max(seen[stream][u], clock[u]);
    }
    if (auto launch = dyn_cast<plan::LaunchOp>(op))
      launch.setStreamAttr(b.getI64IntegerAttr(int64_t(stream)));
    if (auto collective = dyn_cast<plan::CollectiveOp>(op))
      collective.setStreamAttr(b.getI64IntegerAttr(int64_t(stream)));
    ++seen[stream][stream]; // the output counts too: a later writer waits for it
    steps[stream].push_back({op, seen[stream]});
    for (int64_t r : step.reads)
      accesses[size_t(s.base[size_t(r)])].push_back({int(stream), seen[stream][stream], false, r});
    for (int64_t w : step.writes)
      accesses[size_t(s.base[size_t(w)])].push_back({int(stream), seen[stream][stream], true, w});
  }
  return success();
}

} // namespace moe
