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
        gate.getGroupAttr() != up.getGroupAttr() || gate.getPanels() != up.getPanels() ||
        gate.getStored() != up.getStored())
      return rewriter.notifyMatchFailure(op, "gate and up differ in type, precision or layout");
    SmallVector<int64_t> shape(type.getShape());
    shape[1] *= 2;
    rewriter.setInsertionPoint(op);
    // Appended (always-on) experts pair up the same way: [gate, up] each.
    ArrayAttr append;
    if (gate.getAppend() || up.getAppend()) {
      if (!gate.getAppend() || !up.getAppend() || gate.getAppend()->size() != up.getAppend()->size())
        return rewriter.notifyMatchFailure(op, "gate and up append different experts");
      SmallVector<StringRef> names;
      for (auto [g, u] : llvm::zip(gate.getAppend()->getAsValueRange<StringAttr>(),
                                   up.getAppend()->getAsValueRange<StringAttr>()))
        names.append({g, u});
      append = rewriter.getStrArrayAttr(names);
    }
    auto gateUp = rewriter.create<mm::WeightOp>(
        gate.getLoc(), RankedTensorType::get(shape, type.getElementType()),
        gate.getNameAttr(), rewriter.getStrArrayAttr({up.getName()}), StringAttr(),
        DenseI64ArrayAttr(), gate.getPrecisionAttr(), gate.getGroupAttr(), append,
        gate.getPanelsAttr(), gate.getStoredAttr());
    rewriter.replaceOpWithNewOp<mm::ExpertsOp>(
        op, op.getType(), op.getInput(), op.getRoutingWeights(), op.getRoutingIndices(),
        ValueRange{gateUp, op.getDown()}, op.getSharedAttr(), op.getGroupedAttr());
    return success();
  }
};

/// add(experts(x, ...), shared_expert(x)) -> experts(x, ...) with the shared
/// expert appended to every stack as an always-on expert (weight 1, added
/// after the routed ones: the sum is the same, bit for bit). Only where the
/// model allows it: an ungated shared expert of the routed experts' size
/// (DeepSeek-V2/V3 with one shared expert), plain checkpoint tensors stored
/// at one precision (moe-assign-precision may have told them apart).
struct FoldSharedExpert : OpRewritePattern<mm::AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(mm::AddOp add, PatternRewriter &rewriter) const override {
    auto op = add.getLhs().getDefiningOp<mm::ExpertsOp>();
    auto shared = add.getRhs().getDefiningOp<mm::SharedExpertOp>();
    if (!op || !shared) {
      op = add.getRhs().getDefiningOp<mm::ExpertsOp>();
      shared = add.getLhs().getDefiningOp<mm::SharedExpertOp>();
    }
    if (!op || !shared || !op->hasOneUse() || !shared->hasOneUse() ||
        shared.getInput() != op.getInput() || shared.getSigmoidGate())
      return rewriter.notifyMatchFailure(add, "not routed experts plus an ungated shared expert "
                                              "of the same input");
    // One stack per shared weight: gate_up (with concat) or gate and up, down.
    SmallVector<mm::WeightOp> stacks;
    for (Value v : op.getExpertWeights()) {
      auto w = v.getDefiningOp<mm::WeightOp>();
      if (!w || !w.isPerExpert() || w.getScale() || w.getAppend() || !v.hasOneUse())
        return rewriter.notifyMatchFailure(add, "expert stacks are not plain checkpoint tensors");
      stacks.push_back(w);
    }
    SmallVector<Value> parts = {shared.getGate(), shared.getUp(), shared.getDown()};
    SmallVector<SmallVector<StringRef>> appended(stacks.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      auto w = parts[i].getDefiningOp<mm::WeightOp>();
      if (!w || w.isPerExpert() || w.getScale() || w.getConcat() || w.getAppend())
        return rewriter.notifyMatchFailure(add, "shared weights are not plain tensors");
      // gate, up -> the first stack (both, when fused); down -> the last.
      size_t stack = i == 2 ? stacks.size() - 1 : (stacks.size() == 2 ? 0 : i);
      auto stackType = cast<RankedTensorType>(stacks[stack].getType());
      auto partType = cast<RankedTensorType>(w.getType());
      SmallVector<int64_t> want(stackType.getShape().drop_front());
      if (stacks.size() == 2 && i < 2)
        want[0] /= 2; // one half of a gate_up row block
      if (partType.getShape() != ArrayRef<int64_t>(want) ||
          partType.getElementType() != stackType.getElementType() ||
          w.getPrecisionAttr() != stacks[stack].getPrecisionAttr() ||
          w.getGroupAttr() != stacks[stack].getGroupAttr() ||
          w.getPanels() != stacks[stack].getPanels() ||
          w.getStored() != stacks[stack].getStored())
        return rewriter.notifyMatchFailure(add, "the shared expert's size, type, precision or "
                                                "layout differs");
      appended[stack].push_back(w.getName());
    }
    rewriter.setInsertionPoint(op);
    SmallVector<Value> weights;
    for (auto [w, names] : llvm::zip(stacks, appended)) {
      auto type = cast<RankedTensorType>(w.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[0] += 1;
      weights.push_back(rewriter.create<mm::WeightOp>(
          w.getLoc(), RankedTensorType::get(shape, type.getElementType()), w.getNameAttr(),
          w.getConcatAttr(), StringAttr(), DenseI64ArrayAttr(), w.getPrecisionAttr(),
          w.getGroupAttr(), rewriter.getStrArrayAttr(names), w.getPanelsAttr(),
          w.getStoredAttr()));
    }
    rewriter.replaceOpWithNewOp<mm::ExpertsOp>(add, op.getType(), op.getInput(),
                                               op.getRoutingWeights(), op.getRoutingIndices(),
                                               weights, rewriter.getI64IntegerAttr(1),
                                               op.getGroupedAttr());
    return success();
  }
};

/// experts -> experts {grouped}: permute + grouped GEMMs + combine instead
/// of one expert after another.
struct GroupExperts : OpRewritePattern<mm::ExpertsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(mm::ExpertsOp op, PatternRewriter &rewriter) const override {
    if (op.getGrouped())
      return rewriter.notifyMatchFailure(op, "already grouped");
    rewriter.modifyOpInPlace(op, [&] { op.setGrouped(true); });
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
    patterns.add<ConcatGateUp, FoldSharedExpert, GroupExperts, AddRmsNorm>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
