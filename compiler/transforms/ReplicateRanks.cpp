//===- ReplicateRanks.cpp - one copy of the plan program per rank ---------===//
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace moe {
#define GEN_PASS_DEF_REPLICATERANKSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

struct ReplicateRanksPass : ::moe::impl::ReplicateRanksPassBase<ReplicateRanksPass> {
  using ReplicateRanksPassBase::ReplicateRanksPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ranks < 1 || ranks > 4096) {
      module.emitError() << "moe-replicate-ranks: ranks must be in [1, 4096], got "
                         << static_cast<int64_t>(ranks);
      return signalPassFailure();
    }
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main->hasAttr("plan.rank")) {
      module.emitError() << "moe-replicate-ranks: needs the one-rank program func.func @main";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    b.setInsertionPoint(main);
    for (int64_t r = 0; r < ranks; ++r) {
      func::FuncOp copy = cast<func::FuncOp>(b.clone(*main));
      copy.setSymName(("rank" + Twine(r)).str());
      copy->setAttr("plan.rank", b.getI64IntegerAttr(r));
    }
    main.erase();
  }
};

} // namespace
