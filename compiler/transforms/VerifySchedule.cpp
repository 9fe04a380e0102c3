//===- VerifySchedule.cpp - refuse plans whose streams race ---------------===//
#include "compiler/analysis/PlanSchedule.h"
#include "compiler/transforms/Passes.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace moe {
#define GEN_PASS_DEF_VERIFYSCHEDULEPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

/// "plan.launch linear on stream 1" / "plan.output on stream 0".
std::string describe(Operation *op, int stream) {
  std::string s = op->getName().getStringRef().str();
  if (auto launch = dyn_cast<plan::LaunchOp>(op))
    s += " " + launch.info().name.str();
  if (auto collective = dyn_cast<plan::CollectiveOp>(op))
    s += " " + plan::stringifyCollectiveKind(collective.getKind()).str();
  return s + " on stream " + std::to_string(stream);
}

/// "a buffer" / "rows of part 1 of 2 of a buffer" / "KV-cache layer 3".
std::string what(Value v) {
  if (auto kv = v.getDefiningOp<plan::KvCacheOp>())
    return "KV-cache layer " + std::to_string(kv.getLayer());
  if (auto rows = v.getDefiningOp<plan::RowsOp>())
    return "rows of part " + std::to_string(rows.getPart()) + " of " +
           std::to_string(rows.getParts()) + " of a buffer";
  return "a buffer";
}

bool writes(const ::moe::rt::ScheduleStep &s, int64_t buffer) {
  return std::find(s.writes.begin(), s.writes.end(), buffer) != s.writes.end();
}

/// Whether two buffers share bytes: rows of one buffer that intersect, or
/// two arena buffers whose planned ranges overlap.
bool overlap(const ::moe::PlanSchedule &s, int64_t a, int64_t b) {
  return s.overlap(a, b, [&](int64_t a, int64_t b) {
    auto x = s.buffers[size_t(a)].getDefiningOp<plan::AllocOp>();
    auto y = s.buffers[size_t(b)].getDefiningOp<plan::AllocOp>();
    if (!x || !y || !x.getOffset() || !y.getOffset() || !x.getSize() || !y.getSize())
      return false;
    int64_t xo = int64_t(*x.getOffset()), yo = int64_t(*y.getOffset());
    return xo < yo + int64_t(*y.getSize()) && yo < xo + int64_t(*x.getSize());
  });
}

struct VerifySchedulePass : ::moe::impl::VerifySchedulePassBase<VerifySchedulePass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp fn) {
      if (failed(verify(fn)))
        signalPassFailure();
    });
  }

  LogicalResult verify(func::FuncOp fn) {
    // Every rank must run its collectives in the same order: one stream
    // runs them in program order, several could reorder them.
    plan::CollectiveOp firstCollective;
    WalkResult streams = fn.walk([&](plan::CollectiveOp c) {
      if (!firstCollective) {
        firstCollective = c;
      } else if (c.getStream() != firstCollective.getStream()) {
        c.emitError() << "moe-verify-schedule: collectives run on one stream (here "
                      << c.getStream() << ", before on " << firstCollective.getStream()
                      << "), so that every rank runs them in the same order";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (streams.wasInterrupted())
      return failure();
    ::moe::PlanSchedule s = ::moe::planSchedule(fn);
    auto order = ::moe::rt::HappensBefore::compute(s.steps);
    if (!order)
      return fn.emitError() << "moe-verify-schedule: " << order.status().message();
    auto race = ::moe::rt::findRace(s.steps, *order, [&](int64_t a, int64_t b) {
      return overlap(s, a, b);
    });
    if (!race)
      return success();
    const auto &first = s.steps[race->first], &second = s.steps[race->second];
    Operation *a = s.ops[race->first], *b = s.ops[race->second];
    InFlightDiagnostic d =
        b->emitError() << describe(b, second.stream) << " "
                       << (writes(second, race->bufferB) ? "writes" : "reads")
                       << " " << what(s.buffers[size_t(race->bufferB)]) << " that "
                       << describe(a, first.stream) << " "
                       << (writes(first, race->bufferA) ? "writes" : "reads")
                       << (race->bufferA == race->bufferB ? "" : " (their arena bytes overlap)")
                       << ", with no event ordering them: plan.record after the first and "
                          "plan.wait for it before the second";
    d.attachNote(a->getLoc()) << "the other access: " << describe(a, first.stream);
    return failure();
  }
};

} // namespace
