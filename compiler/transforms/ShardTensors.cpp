//===- ShardTensors.cpp - heads and intermediate columns over the ranks ---===//
//
// moe-shard-tensors: Megatron-style tensor parallelism on the plan dialect.
// Each rank keeps a share of every attention layer's heads and of every
// MLP's (and unsharded expert stack's) intermediate columns: the
// projections into them keep their rows, the projection out of them its
// columns, and an all_reduce adds the ranks' partial outputs.
//
//===----------------------------------------------------------------------===//
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/RankPrograms.h"
#include "dialects/plan/PlanOps.h"
#include "moe/abi/KernelCall.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace moe {
#define GEN_PASS_DEF_SHARDTENSORSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

/// [start, start + count) of some dimension.
struct Span {
  int64_t start = 0, count = 0;
};

bool is(plan::LaunchOp l, plan::Kernel k) { return l && l.getKernel().getKernel() == k; }

/// The one launch that writes (or reads) `buffer`, or null when none or
/// several do.
plan::LaunchOp onlyLaunch(Value buffer, bool writes) {
  plan::LaunchOp found;
  for (Operation *user : buffer.getUsers())
    if (auto l = dyn_cast<plan::LaunchOp>(user))
      if (llvm::is_contained(writes ? l.getOuts() : l.getIns(), buffer)) {
        if (found)
          return {};
        found = l;
      }
  return found;
}

int64_t width(Value buffer) { return cast<MemRefType>(buffer.getType()).getShape().back(); }

/// Narrows activation buffer `buffer` ([T, W]) to `columns`.
LogicalResult narrow(Value buffer, int64_t columns) {
  auto alloc = buffer.getDefiningOp<plan::AllocOp>();
  auto type = cast<MemRefType>(buffer.getType());
  if (!alloc || type.getRank() != 2)
    return emitError(buffer.getLoc())
           << "tensor parallelism narrows activations [T, C] in a plan.alloc; got " << type;
  alloc.getResult().setType(
      MemRefType::get({type.getDimSize(0), columns}, type.getElementType()));
  return success();
}

/// Replaces operand `i` of `l`, a plan.weight, by its slice: `rows` of each
/// named matrix (or vector) and `cols` of each matrix.
LogicalResult sliceWeight(plan::LaunchOp l, unsigned i, std::optional<Span> rows,
                          std::optional<Span> cols) {
  OpOperand &operand = l.getInsMutable()[i];
  auto w = operand.get().getDefiningOp<plan::WeightOp>();
  if (!w)
    return l.emitOpError() << "reads operand " << i << ", which is not a plan.weight to slice";
  if (w.getScale())
    return l.emitOpError() << "reads weight '" << w.getName()
                           << "', fp8 with the checkpoint's block scales, which tensor "
                              "parallelism cannot slice (compile with --precision fp8 or bf16)";
  auto type = cast<MemRefType>(w.getType());
  SmallVector<int64_t> shape(type.getShape());
  const int64_t parts = 1 + (w.getConcat() ? int64_t(w.getConcat()->size()) : 0);
  const int64_t rowDim = type.getRank() >= 2 ? type.getRank() - 2 : 0;
  if (rows)
    shape[size_t(rowDim)] = rows->count * parts;
  if (cols)
    shape.back() = cols->count;
  OpBuilder b(w);
  // A slice of its own: another launch may read the whole weight.
  auto slice = cast<plan::WeightOp>(b.clone(*w));
  slice.getResult().setType(MemRefType::get(shape, type.getElementType()));
  // A quantized slice narrower than its group is scaled as one group
  // (fp8's groups are square blocks: rows too).
  int64_t group = slice.getGroup() ? int64_t(*slice.getGroup()) : 0;
  if (rows) {
    slice.setRowsAttr(b.getDenseI64ArrayAttr({rows->start, rows->count}));
    if (type.getElementType().isFloat8E4M3FN())
      group = std::min(group, rows->count);
  }
  if (cols) {
    slice.setColsAttr(b.getDenseI64ArrayAttr({cols->start, cols->count}));
    group = std::min(group, cols->count);
  }
  if (slice.getGroup())
    slice.setGroupAttr(b.getI64IntegerAttr(group));
  // Panels of 8 rows need whole panels in each sliced matrix (a slice may
  // start mid-panel: the plan writer forms them from the slice's rows).
  if (slice.getPanels() && (shape.size() < 2 || shape[shape.size() - 2] % ::moe::rt::kPanelRows))
    slice.removePanelsAttr();
  operand.set(slice.getResult());
  if (w.use_empty())
    w.erase();
  return slice.verify();
}

/// The projection `l` (a linear) of input columns `cols` only: a partial
/// sum, completed by an all_reduce among `group`; its bias is added by the
/// group's first rank (member 0) alone.
LogicalResult rowSplit(plan::LaunchOp l, Span cols, int64_t member, plan::GroupAttr group) {
  if (failed(sliceWeight(l, 1, std::nullopt, cols)))
    return failure();
  if (l.getIns().size() == 3 && member != 0) {
    Operation *bias = l.getIns()[2].getDefiningOp();
    l.getInsMutable().erase(2);
    if (bias && bias->use_empty())
      bias->erase();
  }
  ::moe::allReduceAfter(l, group);
  return success();
}

/// The projection `l` (a linear) of output rows `rows` only (and its bias).
LogicalResult columnSplit(plan::LaunchOp l, Span rows) {
  if (failed(sliceWeight(l, 1, rows, std::nullopt)))
    return failure();
  if (l.getIns().size() == 3 && failed(sliceWeight(l, 2, rows, std::nullopt)))
    return failure();
  return narrow(l.getOuts()[0], rows.count);
}

/// The linear launch that writes operand `i` of `l`, or an error.
FailureOr<plan::LaunchOp> projectionInto(plan::LaunchOp l, unsigned i, StringRef what) {
  plan::LaunchOp p = onlyLaunch(l.getIns()[i], /*writes=*/true);
  if (!is(p, plan::Kernel::Linear) || !onlyLaunch(l.getIns()[i], /*writes=*/false)) {
    l.emitOpError() << "reads its " << what
                    << " from something other than one linear projection, which tensor "
                       "parallelism cannot split";
    return failure();
  }
  return p;
}

/// The linear launch that alone reads `l`'s output, or an error.
FailureOr<plan::LaunchOp> projectionOutOf(plan::LaunchOp l) {
  plan::LaunchOp p = onlyLaunch(l.getOuts()[0], /*writes=*/false);
  if (!is(p, plan::Kernel::Linear) || p.getIns()[0] != l.getOuts()[0]) {
    l.emitOpError() << "has an output that is not read by one linear projection alone, "
                       "which tensor parallelism cannot split";
    return failure();
  }
  return p;
}

class Sharder {
public:
  /// Member `rank` of a tensor-parallel group of `ranks`, whose all-reduces
  /// run among `group` (null: the group is every rank).
  Sharder(int64_t rank, int64_t ranks, plan::GroupAttr group)
      : rank_(rank), ranks_(ranks), group_(group) {}

  /// Rank's share of n things, or an error on `l` naming them.
  FailureOr<Span> share(plan::LaunchOp l, int64_t n, StringRef what) {
    if (n % ranks_) {
      l.emitOpError() << "has " << n << " " << what << ", which do not split evenly over tp="
                      << ranks_ << " ranks";
      return failure();
    }
    return Span{n / ranks_ * rank_, n / ranks_};
  }

  LogicalResult attention(plan::LaunchOp l) {
    auto p = cast<plan::AttentionParamsAttr>(l.getParamsAttr());
    const int64_t heads = p.getNumHeads(), kvHeads = p.getNumKvHeads(), dim = p.getHeadDim();
    auto mine = share(l, heads, "attention heads");
    if (failed(mine))
      return failure();
    // The key-value heads this rank's query heads read: a whole number of
    // them, or (fewer key-value heads than ranks) one that ranks share.
    if (kvHeads % ranks_ && ranks_ % kvHeads) {
      return l.emitOpError() << "has " << kvHeads << " key-value heads; tp=" << ranks_
                             << " ranks need a multiple or a divisor of it";
    }
    const int64_t group = heads / kvHeads;
    const Span kv{mine->start / group,
                  (mine->start + mine->count - 1) / group - mine->start / group + 1};
    auto q = projectionInto(l, 0, "queries"), k = projectionInto(l, 1, "keys"),
         v = projectionInto(l, 2, "values");
    auto o = projectionOutOf(l);
    if (failed(q) || failed(k) || failed(v) || failed(o))
      return failure();
    if (failed(columnSplit(*q, {mine->start * dim, mine->count * dim})) ||
        failed(columnSplit(*k, {kv.start * dim, kv.count * dim})) ||
        failed(columnSplit(*v, {kv.start * dim, kv.count * dim})) ||
        failed(narrow(l.getOuts()[0], mine->count * dim)) ||
        failed(rowSplit(*o, {mine->start * dim, mine->count * dim}, rank_, group_)))
      return failure();
    auto cache = l.getKv().getDefiningOp<plan::KvCacheOp>();
    OpBuilder b(l);
    cache.setKWidthAttr(b.getI64IntegerAttr(kv.count * dim));
    cache.setVWidthAttr(b.getI64IntegerAttr(kv.count * dim));
    l.setParamsAttr(plan::AttentionParamsAttr::get(
        l.getContext(), p.getLayer(), mine->count, kv.count, dim, p.getScale(), p.getRope(),
        p.getSlidingWindow(), p.getQkNormEps()));
    return success();
  }

  /// MLA: the latent (kv_a) stays whole; the query projection and
  /// kv_b_proj keep this rank's heads' rows.
  LogicalResult mla(plan::LaunchOp l) {
    auto p = cast<plan::MlaParamsAttr>(l.getParamsAttr());
    const int64_t heads = p.getNumHeads();
    auto mine = share(l, heads, "attention heads");
    if (failed(mine))
      return failure();
    const int64_t qDim = p.getQkNopeHeadDim() + p.getQkRopeHeadDim(),
                  kvDim = p.getQkNopeHeadDim() + p.getVHeadDim(), vDim = p.getVHeadDim();
    auto q = projectionInto(l, 0, "queries");
    auto o = projectionOutOf(l);
    if (failed(q) || failed(o))
      return failure();
    if (failed(columnSplit(*q, {mine->start * qDim, mine->count * qDim})) ||
        failed(sliceWeight(l, 3, Span{mine->start * kvDim, mine->count * kvDim}, std::nullopt)) ||
        failed(narrow(l.getOuts()[0], mine->count * vDim)) ||
        failed(rowSplit(*o, {mine->start * vDim, mine->count * vDim}, rank_, group_)))
      return failure();
    l.setParamsAttr(plan::MlaParamsAttr::get(
        l.getContext(), p.getLayer(), mine->count, p.getKvLoraRank(), p.getQkNopeHeadDim(),
        p.getQkRopeHeadDim(), vDim, p.getScale(), p.getRope(), p.getNormEps()));
    return success();
  }

  /// gate and up (linear), silu_mul, down (linear).
  LogicalResult mlp(plan::LaunchOp l) {
    auto gate = projectionInto(l, 0, "gate"), up = projectionInto(l, 1, "up");
    auto down = projectionOutOf(l);
    if (failed(gate) || failed(up) || failed(down))
      return failure();
    auto mine = share(l, width(l.getOuts()[0]), "intermediate columns");
    if (failed(mine) || failed(columnSplit(*gate, *mine)) || failed(columnSplit(*up, *mine)) ||
        failed(narrow(l.getOuts()[0], mine->count)) || failed(rowSplit(*down, *mine, rank_, group_)))
      return failure();
    return success();
  }

  /// experts / expert_rows holding all of their experts: every expert's
  /// gate and up rows and down columns of this rank's intermediate share.
  LogicalResult experts(plan::LaunchOp l) {
    auto p = cast<plan::ExpertsParamsAttr>(l.getParamsAttr());
    auto mine = share(l, p.getIntermediate(), "intermediate columns per expert");
    if (failed(mine))
      return failure();
    const unsigned first = is(l, plan::Kernel::Experts) ? 3 : 2, down = l.getIns().size() - 1;
    for (unsigned i = first; i < down; ++i)
      if (failed(sliceWeight(l, i, *mine, std::nullopt)))
        return failure();
    if (failed(sliceWeight(l, down, std::nullopt, *mine)))
      return failure();
    l.setParamsAttr(plan::ExpertsParamsAttr::get(
        l.getContext(), p.getNumExperts(), mine->count, p.getFusedGateUp(), p.getNumShared(),
        p.getGrouped(), p.getStacked(), p.getHeld(), p.getReplicas(), p.getReplica(),
        p.getLayer()));
    ::moe::allReduceAfter(l, group_);
    return success();
  }

  LogicalResult run(func::FuncOp f) {
    SmallVector<plan::LaunchOp> launches;
    f.walk([&](plan::LaunchOp l) { launches.push_back(l); });
    for (plan::LaunchOp l : launches) {
      LogicalResult done = success();
      switch (l.getKernel().getKernel()) {
      case plan::Kernel::Attention: done = attention(l); break;
      case plan::Kernel::MlaAttention: done = mla(l); break;
      case plan::Kernel::SiluMul: done = mlp(l); break;
      case plan::Kernel::Experts:
      case plan::Kernel::ExpertRows:
        // Experts that expert parallelism placed stay whole.
        if (cast<plan::ExpertsParamsAttr>(l.getParamsAttr()).getStacked() == 0)
          done = experts(l);
        break;
      default: break;
      }
      if (failed(done) || failed(l.verify()))
        return failure();
    }
    return shareExchanges(f);
  }

  /// Data-parallel attention: the group holds the same tokens, so each
  /// member sends only its share of the rows to the experts' ranks; an
  /// all_reduce among the group (kind data) after the rows come back
  /// gives every member every row (the others' shares are zeros). The
  /// runtime takes that all_reduce to mean the shares.
  LogicalResult shareExchanges(func::FuncOp f) {
    SmallVector<plan::CollectiveOp> returns;
    f.walk([&](plan::CollectiveOp c) {
      if (c.getKind() == plan::CollectiveKind::all_to_all_v && c.getIns().size() == 1)
        returns.push_back(c);
    });
    if (returns.empty())
      return success();
    if (!group_)
      return returns.front().emitOpError()
             << "exchanges rows among ranks that hold different tokens, but tp=" << ranks_
             << " puts every rank in one tensor-parallel group: data-parallel attention needs "
                "at least two groups";
    auto data = plan::GroupAttr::get(f.getContext(), plan::GroupKind::data, group_.getRanks());
    for (plan::CollectiveOp c : returns)
      ::moe::allReduceAfter(c, data);
    return success();
  }

private:
  int64_t rank_, ranks_;
  plan::GroupAttr group_;
};

struct ShardTensorsPass : ::moe::impl::ShardTensorsPassBase<ShardTensorsPass> {
  using ShardTensorsPassBase::ShardTensorsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const int64_t n = llvm::count_if(module.getOps<func::FuncOp>(),
                                     [](func::FuncOp f) { return f->hasAttr("plan.rank"); });
    if (tp < 1 || n == 0 || n % tp) {
      module.emitError() << "moe-shard-tensors: tp=" << static_cast<int64_t>(tp)
                         << " must divide the " << n
                         << " rank programs (run moe-replicate-ranks first)";
      return signalPassFailure();
    }
    auto ordered = ::moe::rankPrograms(module, "moe-shard-tensors", "ranks", n);
    if (failed(ordered))
      return signalPassFailure();
    WalkResult sliced = module.walk([](plan::WeightOp w) {
      return w.getRows() || w.getCols() ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (sliced.wasInterrupted()) {
      module.emitError() << "moe-shard-tensors: the plan's weights are already split "
                                    "(run it once, on the unsplit rank programs)";
      return signalPassFailure();
    }
    for (auto [rank, f] : llvm::enumerate(*ordered)) {
      const int64_t first = int64_t(rank) / tp * tp;
      // One group of every rank needs no name: a collective spans every rank.
      plan::GroupAttr group;
      if (tp < n)
        group = plan::GroupAttr::get(module.getContext(), plan::GroupKind::tensor,
                                     llvm::to_vector(llvm::seq<int64_t>(first, first + tp)));
      if (failed(Sharder(int64_t(rank) - first, tp, group).run(f)))
        return signalPassFailure();
    }
  }
};

} // namespace
