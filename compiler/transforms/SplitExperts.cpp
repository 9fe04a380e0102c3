//===- SplitExperts.cpp - moe.experts as dispatch, rows, combine ----------===//
#include "compiler/transforms/Passes.h"
#include "dialects/moe/MoeOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace moe {
#define GEN_PASS_DEF_SPLITEXPERTSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;
namespace mm = mlir::moe;

namespace {

struct SplitExperts : OpRewritePattern<mm::ExpertsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(mm::ExpertsOp op, PatternRewriter &rewriter) const override {
    auto input = cast<RankedTensorType>(op.getInput().getType());
    auto ids = cast<RankedTensorType>(op.getRoutingIndices().getType());
    if (ids.isDynamicDim(1) || input.isDynamicDim(1))
      return rewriter.notifyMatchFailure(op, "top-k or hidden size is not static");
    const int64_t tokens = input.getDimSize(0), hidden = input.getDimSize(1);
    const int64_t picks = ids.getDimSize(1) + op.getNumShared();
    auto rowsType = RankedTensorType::get({tokens, picks, hidden}, input.getElementType());
    auto idsType = RankedTensorType::get({tokens, picks}, ids.getElementType());
    auto dispatch = rewriter.create<mm::DispatchOp>(
        op.getLoc(), TypeRange{rowsType, idsType, idsType}, op.getInput(),
        op.getRoutingIndices(), op.getNumExperts(), op.getNumShared());
    auto rows = rewriter.create<mm::ExpertRowsOp>(op.getLoc(), rowsType, dispatch.getRows(),
                                                  dispatch.getSlots(), op.getExpertWeights(),
                                                  op.getGrouped());
    rewriter.replaceOpWithNewOp<mm::CombineOp>(op, op.getType(), rows.getResult(),
                                               dispatch.getMap(), op.getRoutingWeights(),
                                               op.getRoutingIndices());
    return success();
  }
};

struct SplitExpertsPass : ::moe::impl::SplitExpertsPassBase<SplitExpertsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitExperts>(&getContext());
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
