//===- SetRouting.cpp - the routing policy of every router ----------------===//
#include "compiler/transforms/Passes.h"
#include "dialects/moe/MoeOps.h"

#include "mlir/IR/Builders.h"

namespace moe {
#define GEN_PASS_DEF_SETROUTINGPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

struct SetRoutingPass : ::moe::impl::SetRoutingPassBase<SetRoutingPass> {
  using SetRoutingPassBase::SetRoutingPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto chosen = mlir::moe::symbolizeRoutingPolicy(policy);
    if (!chosen) {
      module.emitError() << "moe-set-routing: unknown policy '" << policy
                         << "' (token_choice, capacity, expert_choice)";
      return signalPassFailure();
    }
    Builder b(module.getContext());
    // The router's verifier checks the combination (greedy routers only,
    // a factor in [1, 64]) and names the router it refuses.
    WalkResult result = module.walk([&](mlir::moe::RouterOp r) {
      r.setPolicyAttr(mlir::moe::RoutingPolicyAttr::get(module.getContext(), *chosen));
      r.setCapacityFactorAttr(b.getF64FloatAttr(capacityFactor));
      return failed(r.verify()) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
