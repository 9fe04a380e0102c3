//===- AssignPrecision.cpp - choose each weight's storage precision ------===//
//
// A weight's component comes from how it is used (see Passes.td); a policy
// maps components to precisions. Precisions are ordered by how much they
// keep, so a weight shared by two components takes the more precise choice.
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"
#include "dialects/moe/MoeOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

namespace moe {
#define GEN_PASS_DEF_ASSIGNPRECISIONPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;
namespace mm = mlir::moe;

namespace {

enum class Component { Embedding, LmHead, Router, Experts, SharedExpert, DenseMlp, Attention, Vector };

// The component of one use of a weight.
Component componentOf(OpOperand &use) {
  Operation *user = use.getOwner();
  Value v = use.get();
  return TypeSwitch<Operation *, Component>(user)
      .Case([&](mm::EmbeddingOp op) {
        return v == op.getTable() ? Component::Embedding : Component::Vector;
      })
      .Case([&](mm::LmHeadOp op) {
        return v == op.getWeight() ? Component::LmHead : Component::Vector;
      })
      .Case([&](mm::RouterOp op) {
        return v == op.getWeight() ? Component::Router : Component::Vector;
      })
      .Case([&](mm::ExpertsOp) {
        return use.getOperandNumber() >= 3 ? Component::Experts : Component::Vector;
      })
      .Case([&](mm::SharedExpertOp op) {
        return v == op.getSigmoidGate() ? Component::Vector : Component::SharedExpert;
      })
      .Case([&](mm::SwigluMlpOp) { return Component::DenseMlp; })
      .Case([&](mm::LinearOp op) {
        return v == op.getWeight() ? Component::Attention : Component::Vector;
      })
      .Default([](Operation *) { return Component::Vector; });
}

// Most precise first: a weight shared by two components takes the smaller.
enum class Precision { F32, Bf16, Int8, Int4 };

const char *name(Precision p) {
  switch (p) {
  case Precision::F32: return "f32";
  case Precision::Bf16: return "bf16";
  case Precision::Int8: return "int8";
  case Precision::Int4: return "int4";
  }
  return "";
}

// What `policy` does with a component; nullopt keeps the checkpoint's.
std::optional<Precision> choose(StringRef policy, Component c) {
  if (policy == "fp32")
    return Precision::F32;
  if (policy == "bf16")
    return Precision::Bf16;
  if (c == Component::Vector)
    return std::nullopt;
  if (policy == "int8")
    return Precision::Int8;
  if (policy == "int4")
    return Precision::Int4;
  return std::nullopt;
}

struct AssignPrecisionPass : ::moe::impl::AssignPrecisionPassBase<AssignPrecisionPass> {
  using AssignPrecisionPassBase::AssignPrecisionPassBase;

  void runOnOperation() override {
    StringRef p = policy;
    if (p != "keep" && p != "fp32" && p != "bf16" && p != "int8" && p != "int4") {
      getOperation().emitError() << "unknown precision policy '" << p
                                 << "'; expected keep, fp32, bf16, int8 or int4";
      return signalPassFailure();
    }
    if (int4Group < 2 || int4Group % 2) {
      getOperation().emitError() << "int4-group must be even and at least 2, got "
                                 << int64_t(int4Group);
      return signalPassFailure();
    }
    getOperation().walk([&](mm::WeightOp w) { assign(w); });
  }

  void assign(mm::WeightOp w) {
    if (w.getScale() || w->use_empty()) // block-scaled fp8 stays as stored
      return;
    std::optional<Precision> chosen;
    for (OpOperand &use : w->getUses()) {
      std::optional<Precision> p = choose(policy, componentOf(use));
      if (!p)
        return; // some use keeps the checkpoint's precision
      chosen = chosen ? std::min(*chosen, *p) : *p;
    }
    auto type = cast<RankedTensorType>(w.getType());
    const int64_t cols = type.getShape().back();
    if (*chosen == Precision::Int4 && cols % 2)
      chosen = Precision::Int8; // int4 packs rows of an even length
    OpBuilder b(w);
    w.setPrecisionAttr(b.getStringAttr(name(*chosen)));
    if (*chosen == Precision::Int8)
      w.setGroupAttr(b.getI64IntegerAttr(cols));
    else if (*chosen == Precision::Int4)
      w.setGroupAttr(b.getI64IntegerAttr(std::min<int64_t>(int4Group, cols)));
  }
};

} // namespace
