//===- AssignPrecision.cpp - choose each weight's storage precision ------===//
//
// A weight's component comes from how it is used (see Passes.td); a policy
// maps components to precisions. Precisions are ordered by how much they
// keep (precisionRank), so a weight shared by two components takes the more
// precise choice. The weight layout (rows or panels) is chosen after the
// precision, from the stored type and the kernels that read the weight.
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"
#include "dialects/moe/MoeOps.h"
#include "moe/abi/KernelCall.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <array>
#include <iterator>
#include <optional>

namespace moe {
#define GEN_PASS_DEF_ASSIGNPRECISIONPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;
namespace mm = mlir::moe;

namespace {

enum class Component { Embedding, LmHead, Router, Experts, SharedExpert, DenseMlp, Attention, Vector };
constexpr const char *kComponents[] = {"embedding", "lm_head",   "router",    "experts",
                                       "shared_expert", "dense_mlp", "attention", "vector"};

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
      .Case([&](mm::MlaAttentionOp op) {
        return v == op.getKvB() ? Component::Attention : Component::Vector;
      })
      .Default([](Operation *) { return Component::Vector; });
}

// Whether the kernel behind `use` multiplies by the weight through
// linear(), linearGroup() or experts() (moe.linear, the LM head, the
// router, dense and shared MLPs, routed experts), which honour w8a8 and
// w4a8 (they
// quantize their activations per token) and read panels. Not MLA's kv_b
// (the MLA attention kernel reads it by rows, with f32 activations), the
// embedding lookup or vectors.
bool multipliesThroughLinear(OpOperand &use) {
  const Component c = componentOf(use);
  if (c == Component::Embedding || c == Component::Vector)
    return false;
  if (auto m = dyn_cast<mm::MlaAttentionOp>(use.getOwner()))
    return use.get() != m.getKvB();
  return true;
}

// Whether `use` looks rows up in the weight (the embedding table), which
// multiplies nothing: it reads the stored int8 rows times their scales
// whether or not the products by the same table quantize their activations.
bool isRowLookup(OpOperand &use) {
  auto e = dyn_cast<mm::EmbeddingOp>(use.getOwner());
  return e && use.get() == e.getTable();
}

using mm::Precision;

// How much a precision keeps, most first: a weight shared by two
// components takes the more precise choice. Explicit, since the enum's
// values follow the order precisions were added. w8a8 stores what int8
// stores but also rounds the activations, so it keeps less than int8; fp8
// (3 mantissa bits) and int4 keep less than either, w4a8 less than int4.
int precisionRank(Precision p) {
  switch (p) {
  case Precision::f32: return 0;
  case Precision::bf16: return 1;
  case Precision::int8: return 2;
  case Precision::w8a8: return 3;
  case Precision::fp8: return 4;
  case Precision::int4: return 5;
  case Precision::w4a8: return 6;
  }
  llvm_unreachable("unknown precision");
}

Precision morePrecise(Precision a, Precision b) {
  return precisionRank(a) <= precisionRank(b) ? a : b;
}

std::optional<Precision> parsePrecision(StringRef name) { return mm::symbolizePrecision(name); }

// Per component: the precision to store, or nullopt to keep the checkpoint's.
using Table = std::array<std::optional<Precision>, std::size(kComponents)>;

// A policy's table; false for an unknown policy.
bool policyTable(StringRef policy, Table &t) {
  t.fill(std::nullopt);
  auto matrices = [&](Precision p) {
    for (size_t c = 0; c + 1 < t.size(); ++c) // all but Vector
      t[c] = p;
  };
  if (policy == "fp32" || policy == "bf16") {
    t.fill(policy == "fp32" ? Precision::f32 : Precision::bf16);
  } else if (policy == "w8a8") {
    // Every matrix product in w8a8; the router keeps int8 weights with f32
    // activations (its logits pick the experts: a flipped near tie changes
    // which experts run, and its E x H matrix is too small for w8a8 to save
    // anything), the embedding table int8 (a row lookup has no activations).
    // MLA's kv_b, in `attention`, gets int8 in assign().
    matrices(Precision::w8a8);
    t[size_t(Component::Router)] = Precision::int8;
    t[size_t(Component::Embedding)] = Precision::int8;
  } else if (policy == "w4a8") {
    // Every matrix product in w4a8; the router int4 with f32 activations
    // (its logits pick the experts; the int4 policy's router), the
    // embedding table int4. MLA's kv_b gets int4 in assign().
    matrices(Precision::w4a8);
    t[size_t(Component::Router)] = Precision::int4;
    t[size_t(Component::Embedding)] = Precision::int4;
  } else if (auto p = parsePrecision(policy); p && policy != "f32") {
    matrices(*p); // int8, fp8, int4
  } else if (policy == "seed") {
    // A fixed mixed table (what MoE deployments commonly ship): the router
    // at full precision, experts in 8 bits, the LM head in bf16.
    t[size_t(Component::Router)] = Precision::f32;
    t[size_t(Component::SharedExpert)] = Precision::int8;
    t[size_t(Component::Experts)] = Precision::fp8;
    t[size_t(Component::Embedding)] = Precision::int8;
    t[size_t(Component::LmHead)] = Precision::bf16;
  } else if (policy != "keep") {
    return false;
  }
  return true;
}

struct AssignPrecisionPass : ::moe::impl::AssignPrecisionPassBase<AssignPrecisionPass> {
  using AssignPrecisionPassBase::AssignPrecisionPassBase;

  void runOnOperation() override {
    if (!policyTable(policy, table_)) {
      getOperation().emitError() << "unknown precision policy '" << policy
                                 << "'; expected keep, fp32, bf16, int8, w8a8, fp8, int4, w4a8 or "
                                    "seed";
      return signalPassFailure();
    }
    for (const std::string &entry : overrides) {
      auto [component, precision] = StringRef(entry).split('=');
      const auto *c = llvm::find(kComponents, component);
      std::optional<Precision> p = parsePrecision(precision);
      if (c == std::end(kComponents) || c + 1 == std::end(kComponents) ||
          (!p && precision != "keep")) {
        getOperation().emitError()
            << "override '" << entry
            << "' is not <component>=<precision>: components embedding, lm_head, router, "
               "experts, shared_expert, dense_mlp, attention; precisions keep, f32, bf16, "
               "int8, w8a8, fp8, int4, w4a8";
        return signalPassFailure();
      }
      if ((p == Precision::w8a8 || p == Precision::w4a8) && component == "embedding") {
        getOperation().emitError()
            << "override '" << entry
            << "': the embedding table is looked up by row, not multiplied, so it cannot "
               "quantize activations; " << precision << " applies to lm_head, router, experts, "
               "shared_expert, dense_mlp and attention";
        return signalPassFailure();
      }
      table_[size_t(c - std::begin(kComponents))] = p;
    }
    if (weightLayout != "rows" && weightLayout != "panels") {
      getOperation().emitError() << "unknown weight layout '" << weightLayout
                                 << "'; expected rows or panels";
      return signalPassFailure();
    }
    if (int4Group < 2 || int4Group % 2 || fp8Block < 1) {
      getOperation().emitError() << "int4-group must be even and at least 2 (got "
                                 << int64_t(int4Group) << ") and fp8-block positive (got "
                                 << int64_t(fp8Block) << ")";
      return signalPassFailure();
    }
    // w4a8's kernels sum blocks of 128 elements under one scale.
    if (int4Group % 128 && llvm::is_contained(table_, std::optional(Precision::w4a8))) {
      getOperation().emitError() << "w4a8 needs an int4-group that is a multiple of 128 (got "
                                 << int64_t(int4Group) << ")";
      return signalPassFailure();
    }
    getOperation().walk([&](mm::WeightOp w) {
      assign(w);
      if (weightLayout == "panels")
        assignPanels(w);
    });
  }

  // Panels where the CPU kernels read them: an f32, bf16 or f16 matrix as
  // stored (after assign()), of whole panels, that linear(), linearGroup()
  // and experts() multiply by, and nothing else reads but an embedding
  // lookup. A table tied to the LM head takes panels: its lookup gathers a
  // row from one panel (8 rows' bytes: nothing beside a step), and its LM
  // head, 18% of a batch-64 decode step's FLOPs on the benchmark model,
  // runs the panel tiles. An untied table, which nothing multiplies by,
  // stays rows.
  static void assignPanels(mm::WeightOp w) {
    auto type = cast<RankedTensorType>(w.getType());
    std::optional<Precision> p = w.getPrecision();
    const bool floating = p ? (*p == Precision::f32 || *p == Precision::bf16) : !w.getScale();
    if (!floating || type.getRank() < 2 ||
        type.getDimSize(type.getRank() - 2) % ::moe::rt::kPanelRows ||
        !llvm::any_of(w->getUses(), multipliesThroughLinear) ||
        !llvm::all_of(w->getUses(), [](OpOperand &use) {
          return multipliesThroughLinear(use) || isRowLookup(use);
        }))
      return;
    w.setPanels(true);
  }

  void assign(mm::WeightOp w) {
    if (w.getScale() || w->use_empty()) // block-scaled fp8 stays as stored
      return;
    std::optional<Precision> chosen;
    std::optional<Precision> lookup; // an embedding lookup of int8 or int4 rows
    for (OpOperand &use : w->getUses()) {
      std::optional<Precision> p = table_[size_t(componentOf(use))];
      if (!p)
        return; // some use keeps the checkpoint's precision
      if (*p == Precision::w8a8 && !multipliesThroughLinear(use))
        p = Precision::int8; // MLA's kv_b: its kernel takes plain int8
      if (*p == Precision::w4a8 && !multipliesThroughLinear(use))
        p = Precision::int4; // and plain int4
      if ((*p == Precision::int8 || *p == Precision::int4) && isRowLookup(use)) {
        lookup = lookup ? morePrecise(*lookup, *p) : *p;
        continue;
      }
      chosen = chosen ? morePrecise(*chosen, *p) : *p;
    }
    // A tied table whose LM head is w8a8 (w4a8) stays so under an int8
    // (int4) lookup: the lookup reads the same rows either way. (Taking
    // int8, the more precise, for it had left the benchmark model's LM head,
    // 18% of an int8 decode's bytes, on the slower path that converts every
    // weight to f32.)
    const auto quantizing = [](Precision p) {
      return p == Precision::int8 ? Precision::w8a8 : Precision::w4a8;
    };
    if (lookup && chosen != quantizing(*lookup))
      chosen = chosen ? morePrecise(*chosen, *lookup) : *lookup;
    auto type = cast<RankedTensorType>(w.getType());
    const int64_t cols = type.getShape().back();
    const int64_t rows = type.getNumElements() / cols;
    OpBuilder b(w);
    // The checkpoint's own integers (GPTQ, AWQ) keep their values: only the
    // same bytes with int8 activations replace them, where the group allows
    // it (w4a8: a multiple of 128 or the row; w8a8: the row).
    if (w.getStored()) {
      const int64_t group = *w.getGroup();
      const Precision stored = *w.getPrecision();
      if ((stored == Precision::int4 && *chosen == Precision::w4a8 &&
           (group % 128 == 0 || group == cols)) ||
          (stored == Precision::int8 && *chosen == Precision::w8a8 && group == cols))
        w.setPrecisionAttr(mm::PrecisionAttr::get(b.getContext(), *chosen));
      return;
    }
    if (*chosen == Precision::int4 && cols % 2)
      chosen = Precision::int8; // int4 packs rows of an even length
    if (*chosen == Precision::w4a8 && cols % 2)
      chosen = Precision::w8a8;
    w.setPrecisionAttr(mm::PrecisionAttr::get(b.getContext(), *chosen));
    if (*chosen == Precision::int8 || *chosen == Precision::w8a8)
      w.setGroupAttr(b.getI64IntegerAttr(cols));
    else if (*chosen == Precision::int4 || *chosen == Precision::w4a8)
      w.setGroupAttr(b.getI64IntegerAttr(std::min<int64_t>(int4Group, cols)));
    else if (*chosen == Precision::fp8) // square blocks that fit the matrix
      w.setGroupAttr(b.getI64IntegerAttr(std::min<int64_t>({int64_t(fp8Block), cols, rows})));
  }

  Table table_;
};

} // namespace
