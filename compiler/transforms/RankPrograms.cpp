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

void allReduceAfter(plan::LaunchOp l, plan::GroupAttr group) {
  OpBuilder b(l);
  b.setInsertionPointAfter(l);
  Value y = l.getOuts()[0];
  b.create<plan::CollectiveOp>(
      l.getLoc(), plan::CollectiveKindAttr::get(l.getContext(), plan::CollectiveKind::all_reduce),
      ValueRange{y}, ValueRange{y}, b.getI64IntegerAttr(l.getStream()), group);
}

} // namespace moe
