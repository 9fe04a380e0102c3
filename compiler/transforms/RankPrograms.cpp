//===- RankPrograms.cpp - what the sharding passes share ------------------===//
#include "compiler/transforms/RankPrograms.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace moe {

FailureOr<SmallVector<func::FuncOp>> rankPrograms(ModuleOp module, StringRef pass,
                                                  StringRef option, int64_t ranks) {
  SmallVector<func::FuncOp> programs;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr("plan.rank"))
      programs.push_back(f);
  if (ranks < 1 || int64_t(programs.size()) != ranks) {
    module.emitError() << pass << ": " << option << "=" << ranks
                       << " needs as many rank programs, got " << programs.size()
                       << " (run moe-replicate-ranks{ranks=" << ranks << "} first)";
    return failure();
  }
  llvm::sort(programs, [](func::FuncOp a, func::FuncOp b) {
    return cast<IntegerAttr>(a->getAttr("plan.rank")).getInt() <
           cast<IntegerAttr>(b->getAttr("plan.rank")).getInt();
  });
  return programs;
}

static void allReduceAfter(Operation *op, Value y, int64_t stream, plan::GroupAttr group) {
  OpBuilder b(op);
  b.setInsertionPointAfter(op);
  b.create<plan::CollectiveOp>(
      op->getLoc(),
      plan::CollectiveKindAttr::get(op->getContext(), plan::CollectiveKind::all_reduce),
      ValueRange{y}, ValueRange{y}, b.getI64IntegerAttr(stream), group);
}

void allReduceAfter(plan::LaunchOp l, plan::GroupAttr group) {
  allReduceAfter(l, l.getOuts()[0], l.getStream(), group);
}

void allReduceAfter(plan::CollectiveOp c, plan::GroupAttr group) {
  allReduceAfter(c, c.getOuts()[0], c.getStream(), group);
}

} // namespace moe
