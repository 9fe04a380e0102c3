//===- PlanMemory.cpp - arena offsets from buffer lifetimes --------------===//
#include "compiler/analysis/PlanSchedule.h"
#include "compiler/transforms/Passes.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace moe {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

constexpr int64_t kAlignment = 64;

struct Interval {
  plan::AllocOp alloc;
  std::vector<size_t> uses; ///< schedule steps touching the buffer, in order
  int64_t first = -1, last = -1, size = 0, offset = 0;
};

int64_t bytesAt(MemRefType type, int64_t rows) {
  int64_t n = type.getElementTypeBitWidth() / 8;
  for (int64_t i = 0; i < type.getRank(); ++i)
    n *= type.isDynamicDim(i) ? rows : type.getDimSize(i);
  return (n + kAlignment - 1) / kAlignment * kAlignment;
}

/// Whether two buffers may share bytes: their lifetimes are disjoint in
/// program order and, across streams, every access to the earlier one
/// happens before every access to the later.
bool disjoint(const Interval &a, const Interval &b, const ::moe::rt::HappensBefore &order) {
  if (a.last >= b.first && a.first <= b.last)
    return false;
  if (!order.multiStream())
    return true;
  const Interval &early = a.last < b.first ? a : b, &late = a.last < b.first ? b : a;
  for (size_t x : early.uses)
    for (size_t y : late.uses)
      if (!order.ordered(x, y))
        return false;
  return true;
}

struct PlanMemoryPass : ::moe::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (maxBatchTokens < 1) {
      module.emitError() << "moe-plan-memory: max-batch-tokens must be positive, got "
                         << static_cast<int64_t>(maxBatchTokens);
      return signalPassFailure();
    }
    Builder b(module.getContext());
    bool failed = false;
    // Each function is a rank's program with an arena of its own.
    module.walk([&](func::FuncOp fn) {
      FailureOr<int64_t> bytes = plan(fn, b);
      if (mlir::failed(bytes))
        failed = true;
      else
        fn->setAttr("plan.arena_bytes", b.getI64IntegerAttr(*bytes));
    });
    if (failed)
      return signalPassFailure();
    module->setAttr("plan.max_batch_tokens", b.getI64IntegerAttr(maxBatchTokens));
  }

  /// Places the function's buffers; returns the arena size they need.
  FailureOr<int64_t> plan(func::FuncOp fn, Builder &b) {
    ::moe::PlanSchedule s = ::moe::planSchedule(fn);
    auto order = ::moe::rt::HappensBefore::compute(s.steps);
    if (!order)
      return fn.emitError() << "moe-plan-memory: " << order.status().message();
    std::vector<Interval> intervals;
    fn.walk([&](plan::AllocOp alloc) {
      Interval iv;
      iv.alloc = alloc;
      iv.size = bytesAt(cast<MemRefType>(alloc.getType()), maxBatchTokens);
      intervals.push_back(std::move(iv));
    });
    for (Interval &iv : intervals) {
      auto id = s.bufferId.find(iv.alloc);
      if (id == s.bufferId.end())
        continue; // never used: no memory
      // Its rows (plan.rows views) are uses of it.
      auto touches = [&](const std::vector<int64_t> &buffers) {
        return llvm::any_of(buffers, [&](int64_t b) { return s.base[size_t(b)] == id->second; });
      };
      for (size_t i = 0; i < s.steps.size(); ++i) {
        const auto &st = s.steps[i];
        if (touches(st.reads) || touches(st.writes))
          iv.uses.push_back(i);
        // The program's output lives to the end, whatever reads it later.
        if (isa<plan::OutputOp>(s.ops[i]) && touches(st.reads))
          iv.last = INT64_MAX;
      }
      iv.first = int64_t(iv.uses.front());
      if (iv.last != INT64_MAX)
        iv.last = int64_t(iv.uses.back());
    }
    // First fit in order of first use, against the buffers it may not share
    // bytes with.
    std::stable_sort(intervals.begin(), intervals.end(),
                     [](const Interval &a, const Interval &c) { return a.first < c.first; });
    std::vector<const Interval *> placed;
    int64_t arena = 0;
    for (Interval &iv : intervals) {
      if (iv.first < 0)
        continue;
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (const Interval *other : placed)
        if (!disjoint(*other, iv, *order))
          busy.push_back({other->offset, other->offset + other->size});
      std::sort(busy.begin(), busy.end());
      for (auto [lo, hi] : busy) {
        if (iv.offset + iv.size <= lo)
          break;
        iv.offset = std::max(iv.offset, hi);
      }
      placed.push_back(&iv);
      arena = std::max(arena, iv.offset + iv.size);
      iv.alloc.setOffsetAttr(b.getI64IntegerAttr(iv.offset));
      iv.alloc.setSizeAttr(b.getI64IntegerAttr(iv.size));
    }
    return arena;
  }
};

} // namespace
