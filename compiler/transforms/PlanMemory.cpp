//===- PlanMemory.cpp - arena offsets from buffer lifetimes --------------===//
#include "compiler/transforms/Passes.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <map>

namespace moe {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

constexpr int64_t kAlignment = 64;

struct Interval {
  mutable plan::AllocOp alloc;
  int64_t first, last, size;
};

int64_t bytesAt(MemRefType type, int64_t rows) {
  int64_t n = type.getElementTypeBitWidth() / 8;
  for (int64_t i = 0; i < type.getRank(); ++i)
    n *= type.isDynamicDim(i) ? rows : type.getDimSize(i);
  return (n + kAlignment - 1) / kAlignment * kAlignment;
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
    int64_t peak = 0;
    module.walk([&](func::FuncOp fn) { peak = std::max(peak, plan(fn, b)); });
    module->setAttr("plan.max_batch_tokens", b.getI64IntegerAttr(maxBatchTokens));
    module->setAttr("plan.arena_bytes", b.getI64IntegerAttr(peak));
  }

  /// Places the function's buffers; returns the arena size they need.
  int64_t plan(func::FuncOp fn, Builder &b) {
    llvm::DenseMap<Value, size_t> index;
    std::vector<Interval> intervals;
    int64_t step = 0;
    fn.walk([&](Operation *op) {
      ++step;
      if (auto alloc = dyn_cast<plan::AllocOp>(op)) {
        index[alloc] = intervals.size();
        intervals.push_back({alloc, -1, -1,
                             bytesAt(cast<MemRefType>(alloc.getType()), maxBatchTokens)});
        return;
      }
      for (Value operand : op->getOperands()) {
        auto it = index.find(operand);
        if (it == index.end())
          continue;
        Interval &iv = intervals[it->second];
        if (iv.first < 0)
          iv.first = step;
        // The program's output lives to the end, whatever reads it later.
        if (iv.last != INT64_MAX)
          iv.last = isa<plan::OutputOp>(op) ? INT64_MAX : step;
      }
    });
    // First fit in order of first use, against the buffers still live.
    std::sort(intervals.begin(), intervals.end(),
              [](const Interval &a, const Interval &c) { return a.first < c.first; });
    std::vector<const Interval *> placed;
    std::map<const Interval *, int64_t> offsets;
    int64_t arena = 0;
    for (const Interval &iv : intervals) {
      if (iv.first < 0)
        continue; // never used: no memory
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (const Interval *other : placed)
        if (other->last >= iv.first && other->first <= iv.last)
          busy.push_back({offsets[other], offsets[other] + other->size});
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (auto [lo, hi] : busy) {
        if (offset + iv.size <= lo)
          break;
        offset = std::max(offset, hi);
      }
      offsets[&iv] = offset;
      placed.push_back(&iv);
      arena = std::max(arena, offset + iv.size);
      iv.alloc.setOffsetAttr(b.getI64IntegerAttr(offset));
      iv.alloc.setSizeAttr(b.getI64IntegerAttr(iv.size));
    }
    return arena;
  }
};

} // namespace
