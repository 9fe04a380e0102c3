//===- ShardExperts.cpp - each layer's experts partitioned over ranks -----===//
#include "compiler/transforms/Passes.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace moe {
#define GEN_PASS_DEF_SHARDEXPERTSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

struct ShardExpertsPass : ::moe::impl::ShardExpertsPassBase<ShardExpertsPass> {
  using ShardExpertsPassBase::ShardExpertsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> programs;
    for (auto f : module.getOps<func::FuncOp>())
      if (f->hasAttr("plan.rank"))
        programs.push_back(f);
    if (ep < 1 || int64_t(programs.size()) != ep) {
      module.emitError() << "moe-shard-experts: ep=" << static_cast<int64_t>(ep)
                         << " needs as many rank programs, got " << programs.size()
                         << " (run moe-replicate-ranks{ranks=" << static_cast<int64_t>(ep)
                         << "} first)";
      return signalPassFailure();
    }
    for (func::FuncOp f : programs) {
      const int64_t rank = cast<IntegerAttr>(f->getAttr("plan.rank")).getInt();
      SmallVector<plan::LaunchOp> rows;
      f.walk([&](plan::LaunchOp l) {
        if (l.getKernel().getKernel() == plan::Kernel::ExpertRows)
          rows.push_back(l);
      });
      for (plan::LaunchOp l : rows)
        if (failed(shard(l, rank)))
          return signalPassFailure();
    }
  }

  /// Rank `rank`'s share of one expert_rows launch: its slice of the
  /// stacks, its params, and the all-reduce that completes the rows.
  LogicalResult shard(plan::LaunchOp l, int64_t rank) {
    auto p = cast<plan::ExpertsParamsAttr>(l.getParamsAttr());
    if (p.getStacked() != 0)
      return l.emitOpError() << "is already sharded";
    const int64_t stacked = p.getNumExperts() + p.getNumShared();
    const int64_t first = stacked * rank / ep, last = stacked * (rank + 1) / ep;
    if (first == last)
      return l.emitOpError() << "has " << stacked << " experts, fewer than the "
                             << static_cast<int64_t>(ep) << " expert-parallel ranks";
    OpBuilder b(l);
    for (OpOperand &stack : l.getInsMutable().slice(2, l.getIns().size() - 2)) {
      auto w = stack.get().getDefiningOp<plan::WeightOp>();
      if (!w || w.getExperts())
        return l.emitOpError() << "reads an expert stack that is not a whole plan.weight";
      auto type = cast<MemRefType>(w.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = last - first;
      // A slice of its own: another launch may read the whole stack.
      b.setInsertionPoint(w);
      auto slice = cast<plan::WeightOp>(b.clone(*w));
      slice.getResult().setType(MemRefType::get(shape, type.getElementType()));
      slice.setExpertsAttr(b.getDenseI64ArrayAttr({first, stacked}));
      stack.set(slice.getResult());
      if (w.use_empty())
        w.erase();
    }
    l.setParamsAttr(plan::ExpertsParamsAttr::get(
        l.getContext(), last - first, p.getIntermediate(), p.getFusedGateUp(), 0,
        p.getGrouped(), first, stacked, p.getLayer()));
    b.setInsertionPointAfter(l);
    Value y = l.getOuts()[0];
    b.create<plan::CollectiveOp>(
        l.getLoc(), plan::CollectiveKindAttr::get(l.getContext(), plan::CollectiveKind::all_reduce),
        ValueRange{y}, ValueRange{y}, b.getI64IntegerAttr(l.getStream()));
    return success();
  }
};

} // namespace
