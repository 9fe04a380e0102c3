//===- FuseExperts.cpp - fuse expert projections and residual norms ------===//
#include "compiler/transforms/Passes.h"
#include "dialects/moe/MoeOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace moe {
#define GEN_PASS_DEF_FUSEEXPERTSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;
namespace mm = mlir::moe;

namespace {

/// A plain checkpoint tensor: no block scale, not already concatenated.
mm::WeightOp plainWeight(Value v) {
  auto w = v.getDefiningOp<mm::WeightOp>();
  return w && !w.getScale() && !w.getConcat() ? w : mm::WeightOp();
}

/// experts(gate, up, down) -> experts(gate_up, down), gate_up = the gate
/// stack with each expert's up rows concatenated after its gate rows.
struct ConcatGateUp : OpRewritePattern<mm::ExpertsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(mm::ExpertsOp op, PatternRewriter &rewriter) const override {
    if (op.hasFusedGateUp())
      return rewriter.notifyMatchFailure(op, "gate and up are already one stack");
    mm::WeightOp gate = plainWeight(op.getExpertWeights()[0]);
    mm::WeightOp up = plainWeight(op.getExpertWeights()[1]);
    // Only per-expert ({e}) names concatenate expert by expert.
    if (!gate || !up || !gate.isPerExpert() || !up.isPerExpert())
      return rewriter.notifyMatchFailure(op, "gate/up are not plain per-expert weights");
    auto type = cast<RankedTensorType>(gate.getType());
    if (type != up.getType() || gate.getPrecisionAttr() != up.getPrecisionAttr() ||
        gate.getGroupAttr() != up.getGroupAttr())
      return rewriter.notifyMatchFailure(op, "gate and up differ in type or precision");
    SmallVector<int64_t> shape(type.getShape());
    shape[1] *= 2;
    rewriter.setInsertionPoint(op);
    auto gateUp = rewriter.create<mm::WeightOp>(
        gate.getLoc(), RankedTensorType::get(shape, type.getElementType()),
        gate.getNameAttr(), rewriter.getStrArrayAttr({up.getName()}), StringAttr(),
        DenseI64ArrayAttr(), gate.getPrecisionAttr(), gate.getGroupAttr());
    rewriter.replaceOpWithNewOp<mm::ExpertsOp>(
        op, op.getType(), op.getInput(), op.getRoutingWeights(), op.getRoutingIndices(),
        ValueRange{gateUp, op.getDown()});
    return success();
  }
};

/// rms_norm(add(a, b), w) -> add_rms_norm(a, b, w); the add's other users
/// (the residual stream) take the fused op's sum.
struct AddRmsNorm : OpRewritePattern<mm::RmsNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(mm::RmsNormOp norm, PatternRewriter &rewriter) const override {
    auto add = norm.getInput().getDefiningOp<mm::AddOp>();
    if (!add)
      return rewriter.notifyMatchFailure(norm, "input is not a moe.add");
    // The fused op stands where the add was, so the norm's weight must be
    // available there: a checkpoint weight (no operands) can move up.
    Operation *weight = norm.getWeight().getDefiningOp();
    if (!weight || weight->getNumOperands() != 0 || weight->getBlock() != add->getBlock())
      return rewriter.notifyMatchFailure(norm, "norm weight cannot move above the add");
    if (add->isBeforeInBlock(weight))
      rewriter.modifyOpInPlace(weight, [&] { weight->moveBefore(add); });
    rewriter.setInsertionPoint(add);
    auto fused = rewriter.create<mm::AddRmsNormOp>(
        norm.getLoc(), add.getType(), norm.getType(), add.getLhs(), add.getRhs(),
        norm.getWeight(), norm.getEpsAttr());
    rewriter.replaceOp(norm, fused.getNormed());
    rewriter.replaceOp(add, fused.getSum());
    return success();
  }
};

struct FuseExpertsPass : ::moe::impl::FuseExpertsPassBase<FuseExpertsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ConcatGateUp, AddRmsNorm>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
