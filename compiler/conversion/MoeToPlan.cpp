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
// checkpoint's.
MemRefType storageOf(mm::WeightOp w) {
  auto type = cast<RankedTensorType>(w.getType());
  Builder b(w.getContext());
  Type elem = type.getElementType();
  if (auto p = w.getPrecision()) {
    switch (*p) {
    case mm::Precision::f32: elem = b.getF32Type(); break;
    case mm::Precision::bf16: elem = b.getBF16Type(); break;
    case mm::Precision::int8: elem = b.getIntegerType(8); break;
    case mm::Precision::int4: elem = b.getIntegerType(4); break;
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
                                             w.getAppendAttr()));
          return success();
        })
        .Case([&](mm::EmbeddingOp e) {
          return emit(e, "embedding", {e.getIds(), e.getTable()});
        })
        .Case([&](mm::RmsNormOp n) {
          return emit(n, "rms_norm", {n.getInput(), n.getWeight()},
                      {b_.getNamedAttr("eps", n.getEpsAttr())});
        })
        .Case([&](mm::AddRmsNormOp n) {
          return emit(n, "add_rms_norm", {n.getLhs(), n.getRhs(), n.getWeight()},
                      {b_.getNamedAttr("eps", n.getEpsAttr())});
        })
        .Case([&](mm::LinearOp l) {
          SmallVector<Value> ins = {l.getInput(), l.getWeight()};
          if (l.getBias())
            ins.push_back(l.getBias());
          return emit(l, "linear", ins);
        })
        .Case([&](mm::AddOp a) {
          return emit(a, "add", {a.getLhs(), a.getRhs()});
        })
        .Case([&](mm::LmHeadOp h) {
          return emit(h, "linear", {h.getInput(), h.getWeight()});
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
            launch("sigmoid_gate", {get(s.getInput()), get(s.getSigmoidGate()), y},
                   {gated});
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
          return emit(e, "experts", ins,
                      {b_.getNamedAttr("num_experts",
                                       b_.getI64IntegerAttr(e.getNumExperts())),
                       b_.getNamedAttr("intermediate", b_.getI64IntegerAttr(inter)),
                       b_.getNamedAttr("fused_gate_up",
                                       b_.getBoolAttr(e.hasFusedGateUp())),
                       b_.getNamedAttr("num_shared", b_.getI64IntegerAttr(e.getNumShared())),
                       b_.getNamedAttr("grouped", b_.getBoolAttr(e.getGrouped()))});
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

  plan::LaunchOp launch(StringRef kernel, ValueRange ins, ValueRange outs,
                        Value kv = Value(), ArrayRef<NamedAttribute> params = {}) {
    auto op = b_.create<plan::LaunchOp>(loc_, b_.getStringAttr(kernel), ins, outs,
                                        kv, b_.getI64IntegerAttr(0));
    for (const NamedAttribute &p : params)
      op->setAttr(p.getName(), p.getValue());
    return op;
  }

  /// One launch writing fresh buffers for every result of `op`.
  LogicalResult emit(Operation *op, StringRef kernel, ArrayRef<Value> ins,
                     ArrayRef<NamedAttribute> params = {}, Value kv = Value()) {
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
    launch("linear", {get(x), get(gate)}, {g});
    launch("linear", {get(x), get(up)}, {u});
    launch("silu_mul", {g, u}, {h});
    Value y = alloc(x.getType());
    launch("linear", {h, get(down)}, {y});
    return y;
  }

  Value kvCache(int64_t layer, StringRef kind, int64_t kWidth, int64_t vWidth) {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(b_.getBlock());
    return b_.create<plan::KvCacheOp>(loc_, plan::KvCacheType::get(b_.getContext()),
                                      layer, kind, kWidth, vWidth);
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

  void ropeAttrs(SmallVectorImpl<NamedAttribute> &attrs, const ::moe::RopeTable &r,
                 bool interleaved) {
    attrs.push_back(b_.getNamedAttr("inv_freq", b_.getDenseF32ArrayAttr(r.invFreq)));
    attrs.push_back(b_.getNamedAttr("attention_factor",
                                    b_.getF32FloatAttr(r.attentionFactor)));
    attrs.push_back(b_.getNamedAttr("interleaved", b_.getBoolAttr(interleaved)));
  }

  LogicalResult lowerAttention(mm::AttentionOp a) {
    int64_t hd = a.getHeadDim(), kvWidth = a.getNumKvHeads() * hd;
    auto table = rope(hd, a.getRopeTheta().convertToDouble(), a.getRopeScaling(), a);
    if (failed(table))
      return failure();
    Value kv = kvCache(a.getLayer(), "gqa", kvWidth, kvWidth);
    SmallVector<NamedAttribute> attrs = {
        b_.getNamedAttr("layer", a.getLayerAttr()),
        b_.getNamedAttr("num_heads", a.getNumHeadsAttr()),
        b_.getNamedAttr("num_kv_heads", a.getNumKvHeadsAttr()),
        b_.getNamedAttr("head_dim", a.getHeadDimAttr()),
        b_.getNamedAttr("scale", b_.getF32FloatAttr(1.0 / std::sqrt(double(hd)))),
        b_.getNamedAttr("sliding_window",
                        b_.getI64IntegerAttr(a.getSlidingWindow().value_or(0))),
        b_.getNamedAttr("qk_norm_eps", b_.getF32FloatAttr(
                                           a.getNormEps().convertToDouble()))};
    ropeAttrs(attrs, *table, /*interleaved=*/false);
    SmallVector<Value> ins = {a.getQ(), a.getK(), a.getV(), a.getPositions()};
    ins.append(a.getQkNorm().begin(), a.getQkNorm().end());
    return emit(a, "attention", ins, attrs, kv);
  }

  LogicalResult lowerMla(mm::MlaAttentionOp a) {
    int64_t ropeDim = a.getQkRopeHeadDim();
    auto table = rope(ropeDim, a.getRopeTheta().convertToDouble(), a.getRopeScaling(), a);
    if (failed(table))
      return failure();
    Value kv = kvCache(a.getLayer(), "mla", a.getKvLoraRank(), ropeDim);
    SmallVector<NamedAttribute> attrs = {
        b_.getNamedAttr("layer", a.getLayerAttr()),
        b_.getNamedAttr("num_heads", a.getNumHeadsAttr()),
        b_.getNamedAttr("kv_lora_rank", a.getKvLoraRankAttr()),
        b_.getNamedAttr("qk_nope_head_dim", a.getQkNopeHeadDimAttr()),
        b_.getNamedAttr("qk_rope_head_dim", a.getQkRopeHeadDimAttr()),
        b_.getNamedAttr("v_head_dim", a.getVHeadDimAttr()),
        b_.getNamedAttr("scale", b_.getF32FloatAttr(
                                     a.getSoftmaxScale().convertToDouble())),
        b_.getNamedAttr("norm_eps", b_.getF32FloatAttr(
                                        a.getNormEps().convertToDouble()))};
    ropeAttrs(attrs, *table, a.getRopeInterleave());
    return emit(a, "mla_attention",
                {a.getQ(), a.getKvA(), a.getKvNorm(), a.getKvB(), a.getPositions()},
                attrs, kv);
  }

  LogicalResult lowerRouter(mm::RouterOp r) {
    SmallVector<Value> ins = {r.getInput(), r.getWeight()};
    if (r.getBias())
      ins.push_back(r.getBias());
    int64_t experts = cast<RankedTensorType>(r.getWeight().getType()).getDimSize(0);
    return emit(
        r, "router", ins,
        {b_.getNamedAttr("num_experts", b_.getI64IntegerAttr(experts)),
         b_.getNamedAttr("top_k", r.getTopKAttr()),
         b_.getNamedAttr("scoring", b_.getStringAttr(
                                        mm::stringifyScoring(r.getScoring()))),
         b_.getNamedAttr("method", b_.getStringAttr(mm::stringifyTopkMethod(
                                       r.getTopkMethod()))),
         b_.getNamedAttr("norm_topk_prob", r.getNormTopkProbAttr()),
         b_.getNamedAttr("n_group", r.getNGroupAttr()),
         b_.getNamedAttr("topk_group", r.getTopkGroupAttr()),
         b_.getNamedAttr("routed_scaling_factor",
                         b_.getF32FloatAttr(
                             r.getRoutedScalingFactor().convertToDouble()))});
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
