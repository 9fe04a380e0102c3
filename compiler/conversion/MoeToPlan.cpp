//===- MoeToPlan.cpp - moe graph -> plan buffers and launches -------------===//
#include "compiler/conversion/Passes.h"
#include "compiler/conversion/Rope.h"
#include "dialects/moe/MoeOps.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

namespace moe {
#define GEN_PASS_DEF_MOETOPLANPASS
#include "compiler/conversion/Passes.h.inc"
} // namespace moe

using namespace mlir;
namespace mm = mlir::moe;

namespace {

MemRefType memrefOf(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}

// How the plan stores a weight: its precision's element type, else the
// checkpoint's (w8a8: i8, w4a8: i4, with int8_activations on the
// plan.weight).
MemRefType storageOf(mm::WeightOp w) {
  auto type = cast<RankedTensorType>(w.getType());
  Builder b(w.getContext());
  Type elem = type.getElementType();
  if (auto p = w.getPrecision()) {
    switch (*p) {
    case mm::Precision::f32: elem = b.getF32Type(); break;
    case mm::Precision::bf16: elem = b.getBF16Type(); break;
    case mm::Precision::int8:
    case mm::Precision::w8a8: elem = b.getIntegerType(8); break;
    case mm::Precision::int4:
    case mm::Precision::w4a8: elem = b.getIntegerType(4); break;
    case mm::Precision::fp8: elem = b.getFloat8E4M3FNType(); break;
    }
  }
  return MemRefType::get(type.getShape(), elem);
}

class Lowering {
public:
  Lowering(ModuleOp module, func::FuncOp forward, int64_t maxContext)
      : module_(module), forward_(forward), b_(module.getContext()),
        maxContext_(maxContext) {}

  LogicalResult run() {
    b_.setInsertionPoint(forward_);
    auto main = b_.create<func::FuncOp>(forward_.getLoc(), "main",
                                        b_.getFunctionType({}, {}));
    b_.setInsertionPointToEnd(main.addEntryBlock());
    for (auto [i, arg] : llvm::enumerate(forward_.getArguments()))
      map_.map(arg, b_.create<plan::InputOp>(forward_.getLoc(),
                                             memrefOf(arg.getType()), i));
    for (Operation &op : forward_.getBody().front())
      if (failed(lower(op)))
        return failure();
    b_.create<func::ReturnOp>(forward_.getLoc());
    module_->setAttr("plan.max_context", b_.getI64IntegerAttr(maxContext_));
    forward_.erase();
    return success();
  }

private:
  LogicalResult lower(Operation &op) {
    loc_ = op.getLoc();
    return TypeSwitch<Operation *, LogicalResult>(&op)
        .Case([&](mm::WeightOp w) {
          map_.map(w.getResult(),
                   b_.create<plan::WeightOp>(loc_, storageOf(w), w.getNameAttr(),
                                             w.getConcatAttr(), w.getScaleAttr(),
                                             w.getBlockAttr(), w.getGroupAttr(),
                                             w.getAppendAttr(), DenseI64ArrayAttr(), IntegerAttr(),
                                             DenseI64ArrayAttr(), DenseI64ArrayAttr(),
                                             w.getPrecision() == mm::Precision::w8a8 ||
                                                     w.getPrecision() == mm::Precision::w4a8
                                                 ? b_.getUnitAttr()
                                                 : UnitAttr(),
                                             w.getPanelsAttr()));
          return success();
        })
        .Case([&](mm::EmbeddingOp e) {
          return emit(e, plan::Kernel::Embedding, {e.getIds(), e.getTable()});
        })
        .Case([&](mm::RmsNormOp n) {
          return emit(n, plan::Kernel::RmsNorm, {n.getInput(), n.getWeight()},
                      plan::RmsNormParamsAttr::get(ctx(), f32(n.getEps())));
        })
        .Case([&](mm::AddRmsNormOp n) {
          return emit(n, plan::Kernel::AddRmsNorm, {n.getLhs(), n.getRhs(), n.getWeight()},
                      plan::RmsNormParamsAttr::get(ctx(), f32(n.getEps())));
        })
        .Case([&](mm::LinearOp l) {
          SmallVector<Value> ins = {l.getInput(), l.getWeight()};
          if (l.getBias())
            ins.push_back(l.getBias());
          return emit(l, plan::Kernel::Linear, ins);
        })
        .Case([&](mm::AddOp a) {
          return emit(a, plan::Kernel::Add, {a.getLhs(), a.getRhs()});
        })
        .Case([&](mm::LmHeadOp h) {
          return emit(h, plan::Kernel::Linear, {h.getInput(), h.getWeight()});
        })
        .Case([&](mm::AttentionOp a) { return lowerAttention(a); })
        .Case([&](mm::MlaAttentionOp a) { return lowerMla(a); })
        .Case([&](mm::SwigluMlpOp m) {
          map_.map(m.getResult(), swiglu(m.getInput(), m.getGate(), m.getUp(),
                                         m.getDown()));
          return success();
        })
        .Case([&](mm::SharedExpertOp s) {
          Value y = swiglu(s.getInput(), s.getGate(), s.getUp(), s.getDown());
          if (s.getSigmoidGate()) {
            Value gated = alloc(s.getResult().getType());
            launch(plan::Kernel::SigmoidGate,
                   {get(s.getInput()), get(s.getSigmoidGate()), y}, {gated});
            y = gated;
          }
          map_.map(s.getResult(), y);
          return success();
        })
        .Case([&](mm::RouterOp r) { return lowerRouter(r); })
        .Case([&](mm::ExpertsOp e) {
          SmallVector<Value> ins = {e.getInput(), e.getRoutingWeights(),
                                    e.getRoutingIndices()};
          ins.append(e.getExpertWeights().begin(), e.getExpertWeights().end());
          int64_t inter =
              cast<RankedTensorType>(e.getDown().getType()).getDimSize(2);
          return emit(e, plan::Kernel::Experts, ins,
                      plan::ExpertsParamsAttr::get(
                          ctx(), e.getNumExperts(), inter, b_.getBoolAttr(e.hasFusedGateUp()),
                          e.getNumShared(), b_.getBoolAttr(e.getGrouped()), 0, nullptr, nullptr,
                          nullptr, -1));
        })
        .Case([&](mm::DispatchOp d) {
          return emit(d, plan::Kernel::Dispatch, {d.getInput(), d.getRoutingIndices()},
                      plan::DispatchParamsAttr::get(ctx(), int64_t(d.getExperts()),
                                                    int64_t(d.getShared())));
        })
        .Case([&](mm::ExpertRowsOp r) {
          // Which stacked experts are routed does not matter to the rows.
          SmallVector<Value> ins = {r.getRows(), r.getSlots()};
          ins.append(r.getExpertWeights().begin(), r.getExpertWeights().end());
          auto down = cast<RankedTensorType>(r.getDown().getType());
          // The decoder layer, from the router whose picks were dispatched
          // (for the placement table once the rows are sharded).
          int64_t layer = -1;
          if (auto d = r.getSlots().getDefiningOp<mm::DispatchOp>())
            if (auto router = d.getRoutingIndices().getDefiningOp<mm::RouterOp>())
              layer = int64_t(router.getLayer());
          return emit(r, plan::Kernel::ExpertRows, ins,
                      plan::ExpertsParamsAttr::get(
                          ctx(), down.getDimSize(0), down.getDimSize(2),
                          b_.getBoolAttr(r.hasFusedGateUp()), 0, b_.getBoolAttr(r.getGrouped()),
                          0, nullptr, nullptr, nullptr, layer));
        })
        .Case([&](mm::CombineOp c) {
          return emit(c, plan::Kernel::Combine,
                      {c.getRows(), c.getMap(), c.getRoutingWeights(), c.getRoutingIndices()});
        })
        .Case([&](func::ReturnOp r) {
          for (Value v : r.getOperands())
            b_.create<plan::OutputOp>(loc_, get(v));
          return success();
        })
        .Default([&](Operation *other) {
          return other->emitOpError("cannot be lowered to the plan dialect");
        });
  }

  Value get(Value v) { return map_.lookup(v); }

  Value alloc(Type tensorType) {
    return b_.create<plan::AllocOp>(loc_, memrefOf(tensorType), IntegerAttr(),
                                    IntegerAttr());
  }

  MLIRContext *ctx() { return b_.getContext(); }
  /// Kernel parameters are f32 in the plan.
  FloatAttr f32(const APFloat &v) { return b_.getF32FloatAttr(float(v.convertToDouble())); }
  FloatAttr f32(double v) { return b_.getF32FloatAttr(float(v)); }

  plan::LaunchOp launch(plan::Kernel kernel, ValueRange ins, ValueRange outs,
                        Value kv = Value(), Attribute params = {}) {
    return b_.create<plan::LaunchOp>(loc_, plan::KernelAttr::get(ctx(), kernel), ins, outs,
                                     kv, params, b_.getI64IntegerAttr(0));
  }

  /// One launch writing fresh buffers for every result of `op`.
  LogicalResult emit(Operation *op, plan::Kernel kernel, ArrayRef<Value> ins,
                     Attribute params = {}, Value kv = Value()) {
    SmallVector<Value> mappedIns, outs;
    for (Value in : ins)
      mappedIns.push_back(get(in));
    for (Value result : op->getResults()) {
      outs.push_back(alloc(result.getType()));
      map_.map(result, outs.back());
    }
    launch(kernel, mappedIns, outs, kv, params);
    return success();
  }

  /// down(silu(gate x) * up x) as three linears and a silu_mul.
  Value swiglu(Value x, Value gate, Value up, Value down) {
    int64_t inter = cast<RankedTensorType>(gate.getType()).getDimSize(0);
    auto interType = RankedTensorType::get({ShapedType::kDynamic, inter},
                                           b_.getF32Type());
    Value g = alloc(interType), u = alloc(interType), h = alloc(interType);
    launch(plan::Kernel::Linear, {get(x), get(gate)}, {g});
    launch(plan::Kernel::Linear, {get(x), get(up)}, {u});
    launch(plan::Kernel::SiluMul, {g, u}, {h});
    Value y = alloc(x.getType());
    launch(plan::Kernel::Linear, {h, get(down)}, {y});
    return y;
  }

  Value kvCache(int64_t layer, plan::KvKind kind, int64_t kWidth, int64_t vWidth) {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(b_.getBlock());
    return b_.create<plan::KvCacheOp>(loc_, plan::KvCacheType::get(ctx()), layer, kind,
                                      kWidth, vWidth);
  }

  FailureOr<::moe::RopeTable> rope(int64_t rotaryDim, double theta,
                            std::optional<DictionaryAttr> scaling,
                            Operation *op) {
    ::moe::RopeTable table;
    std::string error;
    if (!::moe::computeRope(rotaryDim, theta, scaling ? *scaling : DictionaryAttr(),
                     maxPositions(), table, error))
      return op->emitOpError() << error;
    return table;
  }

  int64_t maxPositions() {
    auto config = module_->getAttrOfType<DictionaryAttr>("moe.config");
    if (auto v = config ? config.getAs<IntegerAttr>("max_position_embeddings")
                        : IntegerAttr())
      return v.getInt();
    return maxContext_;
  }

  plan::RopeAttr ropeAttr(const ::moe::RopeTable &r, bool interleaved) {
    return plan::RopeAttr::get(ctx(), b_.getDenseF32ArrayAttr(r.invFreq),
                               b_.getF32FloatAttr(r.attentionFactor),
                               b_.getBoolAttr(interleaved));
  }

  LogicalResult lowerAttention(mm::AttentionOp a) {
    int64_t hd = a.getHeadDim(), kvWidth = a.getNumKvHeads() * hd;
    auto table = rope(hd, a.getRopeTheta().convertToDouble(), a.getRopeScaling(), a);
    if (failed(table))
      return failure();
    Value kv = kvCache(a.getLayer(), plan::KvKind::gqa, kvWidth, kvWidth);
    auto params = plan::AttentionParamsAttr::get(
        ctx(), a.getLayer(), a.getNumHeads(), a.getNumKvHeads(), hd,
        f32(1.0 / std::sqrt(double(hd))), ropeAttr(*table, /*interleaved=*/false),
        a.getSlidingWindow().value_or(0), f32(a.getNormEps()));
    SmallVector<Value> ins = {a.getQ(), a.getK(), a.getV(), a.getPositions()};
    ins.append(a.getQkNorm().begin(), a.getQkNorm().end());
    return emit(a, plan::Kernel::Attention, ins, params, kv);
  }

  LogicalResult lowerMla(mm::MlaAttentionOp a) {
    int64_t ropeDim = a.getQkRopeHeadDim();
    auto table = rope(ropeDim, a.getRopeTheta().convertToDouble(), a.getRopeScaling(), a);
    if (failed(table))
      return failure();
    Value kv = kvCache(a.getLayer(), plan::KvKind::mla, a.getKvLoraRank(), ropeDim);
    auto params = plan::MlaParamsAttr::get(
        ctx(), a.getLayer(), a.getNumHeads(), a.getKvLoraRank(), a.getQkNopeHeadDim(),
        ropeDim, a.getVHeadDim(), f32(a.getSoftmaxScale()),
        ropeAttr(*table, a.getRopeInterleave()), f32(a.getNormEps()));
    return emit(a, plan::Kernel::MlaAttention,
                {a.getQ(), a.getKvA(), a.getKvNorm(), a.getKvB(), a.getPositions()}, params, kv);
  }

  LogicalResult lowerRouter(mm::RouterOp r) {
    SmallVector<Value> ins = {r.getInput(), r.getWeight()};
    if (r.getBias())
      ins.push_back(r.getBias());
    int64_t experts = cast<RankedTensorType>(r.getWeight().getType()).getDimSize(0);
    return emit(r, plan::Kernel::Router, ins,
                plan::RouterParamsAttr::get(ctx(), experts, r.getTopK(), r.getScoring(),
                                            r.getTopkMethod(), r.getNormTopkProbAttr(),
                                            r.getNGroup(), r.getTopkGroup(),
                                            f32(r.getRoutedScalingFactor()), r.getLayer(),
                                            r.getPolicy(),
                                            r.getPolicy() == mm::RoutingPolicy::token_choice
                                                ? FloatAttr()
                                                : f32(r.getCapacityFactor())));
  }

  ModuleOp module_;
  func::FuncOp forward_;
  OpBuilder b_;
  int64_t maxContext_;
  IRMapping map_;
  Location loc_ = UnknownLoc::get(module_.getContext());
};

struct MoeToPlanPass : ::moe::impl::MoeToPlanPassBase<MoeToPlanPass> {
  using MoeToPlanPassBase::MoeToPlanPassBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("moe-to-plan: the module has no func.func @forward");
      return signalPassFailure();
    }
    int64_t context = maxContext;
    auto config = module->getAttrOfType<DictionaryAttr>("moe.config");
    if (auto positions = config ? config.getAs<IntegerAttr>("max_position_embeddings")
                                : IntegerAttr())
      context = std::min<int64_t>(context, positions.getInt());
    if (context < 1) {
      module.emitError() << "moe-to-plan: max-context must be positive, got "
                         << context;
      return signalPassFailure();
    }
    if (failed(Lowering(module, forward, context).run()))
      signalPassFailure();
  }
};

} // namespace
