//===- ShardExperts.cpp - each layer's experts over the ranks -------------===//
//
// Two passes place the stacked experts of each expert_rows launch on the
// rank programs and rewrite each rank's launch to hold only its share:
// moe-shard-experts in contiguous blocks, moe-place-experts as the
// placement library plans from a routing profile (replicating hot
// experts). Both end the same way: the rank's stacks are plan.weight
// slices of its experts, the launch's params say which experts and
// replicas it holds, and an all_reduce of the rows completes them.
//
//===----------------------------------------------------------------------===//
#include "compiler/placement/ExpertPlacement.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/RankPrograms.h"
#include "dialects/plan/PlanOps.h"
#include "moe/abi/RoutingProfile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>

namespace moe {
#define GEN_PASS_DEF_SHARDEXPERTSPASS
#define GEN_PASS_DEF_PLACEEXPERTSPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace moe

using namespace mlir;

namespace {

/// One stack of a rank's expert_rows: which stacked expert, and which of
/// its replicas.
struct Held {
  int64_t expert = 0, replica = 0, replicas = 1;
};

SmallVector<plan::LaunchOp> expertRowsOf(func::FuncOp f) {
  SmallVector<plan::LaunchOp> rows;
  f.walk([&](plan::LaunchOp l) {
    if (l.getKernel().getKernel() == plan::Kernel::ExpertRows)
      rows.push_back(l);
  });
  return rows;
}

/// Sends expert_rows `l`'s rows to the ranks that hold their experts and
/// returns the results: all_to_all_v before and after it, `l` reading and
/// writing buffers of every rank's rows ([T, ranks x P, H]).
void exchangeAround(plan::LaunchOp l, int64_t ranks) {
  OpBuilder b(l);
  auto received = [&](Value v) {
    auto t = cast<MemRefType>(v.getType());
    SmallVector<int64_t> shape(t.getShape());
    shape[1] *= ranks;
    return b.create<plan::AllocOp>(l.getLoc(), MemRefType::get(shape, t.getElementType()),
                                   IntegerAttr(), IntegerAttr())
        .getResult();
  };
  auto kind = plan::CollectiveKindAttr::get(l.getContext(), plan::CollectiveKind::all_to_all_v);
  auto stream = b.getI64IntegerAttr(l.getStream());
  Value rows = l.getIns()[0], slots = l.getIns()[1], y = l.getOuts()[0];
  Value inRows = received(rows), inSlots = received(slots), out = received(y);
  b.create<plan::CollectiveOp>(l.getLoc(), kind, ValueRange{rows, slots},
                               ValueRange{inRows, inSlots}, stream, plan::GroupAttr());
  l.getInsMutable()[0].set(inRows);
  l.getInsMutable()[1].set(inSlots);
  l.getOutsMutable()[0].set(out);
  b.setInsertionPointAfter(l);
  b.create<plan::CollectiveOp>(l.getLoc(), kind, ValueRange{out}, ValueRange{y}, stream,
                               plan::GroupAttr());
}

/// Rewrites one rank's expert_rows launch to hold `held` of its stacked
/// experts: slices of the stacks, its params, and the all-reduce that
/// completes the rows (or, with `exchangeRanks`, the exchange of rows with
/// that many ranks).
LogicalResult shard(plan::LaunchOp l, ArrayRef<Held> held, int64_t exchangeRanks = 0) {
  auto p = cast<plan::ExpertsParamsAttr>(l.getParamsAttr());
  if (p.getStacked() != 0)
    return l.emitOpError() << "is already sharded";
  const int64_t stacked = p.getNumExperts() + p.getNumShared();
  if (held.empty())
    return l.emitOpError() << "would hold none of its " << stacked << " experts";
  SmallVector<int64_t> experts, replica, replicas;
  bool replicated = false;
  for (const Held &h : held) {
    experts.push_back(h.expert);
    replica.push_back(h.replica);
    replicas.push_back(h.replicas);
    replicated |= h.replicas > 1;
  }
  OpBuilder b(l);
  for (OpOperand &stack : l.getInsMutable().slice(2, l.getIns().size() - 2)) {
    auto w = stack.get().getDefiningOp<plan::WeightOp>();
    if (!w || w.getExperts())
      return l.emitOpError() << "reads an expert stack that is not a whole plan.weight";
    auto type = cast<MemRefType>(w.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = int64_t(held.size());
    // A slice of its own: another launch may read the whole stack.
    b.setInsertionPoint(w);
    auto slice = cast<plan::WeightOp>(b.clone(*w));
    slice.getResult().setType(MemRefType::get(shape, type.getElementType()));
    slice.setExpertsAttr(b.getDenseI64ArrayAttr(experts));
    slice.setStackedAttr(b.getI64IntegerAttr(stacked));
    stack.set(slice.getResult());
    if (w.use_empty())
      w.erase();
  }
  auto array = [&](ArrayRef<int64_t> v) {
    return replicated ? b.getDenseI64ArrayAttr(v) : DenseI64ArrayAttr();
  };
  l.setParamsAttr(plan::ExpertsParamsAttr::get(
      l.getContext(), int64_t(held.size()), p.getIntermediate(), p.getFusedGateUp(), 0,
      p.getGrouped(), stacked, b.getDenseI64ArrayAttr(experts), array(replicas), array(replica),
      p.getLayer()));
  if (failed(l.verify()))
    return failure();
  if (exchangeRanks)
    exchangeAround(l, exchangeRanks);
  else
    ::moe::allReduceAfter(l);
  return success();
}

struct ShardExpertsPass : ::moe::impl::ShardExpertsPassBase<ShardExpertsPass> {
  using ShardExpertsPassBase::ShardExpertsPassBase;

  void runOnOperation() override {
    auto programs = ::moe::rankPrograms(getOperation(), "moe-shard-experts", "ep", ep);
    if (failed(programs))
      return signalPassFailure();
    for (auto [rank, f] : llvm::enumerate(*programs))
      for (plan::LaunchOp l : expertRowsOf(f)) {
        auto p = cast<plan::ExpertsParamsAttr>(l.getParamsAttr());
        const int64_t stacked = p.getNumExperts() + p.getNumShared();
        SmallVector<Held> held;
        for (int64_t e = stacked * int64_t(rank) / ep; e < stacked * int64_t(rank + 1) / ep; ++e)
          held.push_back({e});
        if (held.empty()) {
          l.emitOpError() << "has " << stacked << " experts, fewer than the "
                          << static_cast<int64_t>(ep) << " expert-parallel ranks";
          return signalPassFailure();
        }
        if (failed(shard(l, held, dpAttention ? int64_t(ep) : 0)))
          return signalPassFailure();
      }
  }
};

struct PlaceExpertsPass : ::moe::impl::PlaceExpertsPassBase<PlaceExpertsPass> {
  using PlaceExpertsPassBase::PlaceExpertsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto programs = ::moe::rankPrograms(module, "moe-place-experts", "ranks", ranks);
    if (failed(programs))
      return signalPassFailure();
    FailureOr<::moe::rt::RoutingProfile> profile = readProfile(module);
    if (failed(profile))
      return signalPassFailure();
    // Every rank's program has the same launches: plan each layer once,
    // from rank 0's, then give each rank its share.
    std::map<int64_t, int64_t> routed; // decoder layer -> its router's experts
    (*programs)[0].walk([&](plan::LaunchOp l) {
      if (auto r = dyn_cast_or_null<plan::RouterParamsAttr>(l.getParamsAttr()))
        routed[r.getLayer()] = r.getNumExperts();
    });
    std::map<int64_t, std::vector<std::vector<Held>>> shares; // layer -> per rank
    for (plan::LaunchOp l : expertRowsOf((*programs)[0])) {
      auto p = cast<plan::ExpertsParamsAttr>(l.getParamsAttr());
      auto planned = planLayer(l, p, routed, *profile);
      if (failed(planned))
        return signalPassFailure();
      shares[p.getLayer()] = std::move(*planned);
    }
    for (auto [rank, f] : llvm::enumerate(*programs))
      for (plan::LaunchOp l : expertRowsOf(f)) {
        auto p = cast<plan::ExpertsParamsAttr>(l.getParamsAttr());
        auto it = shares.find(p.getLayer());
        if (it == shares.end()) {
          l.emitOpError() << "is not in rank 0's program: the rank programs differ";
          return signalPassFailure();
        }
        if (failed(shard(l, it->second[rank], dpAttention ? int64_t(ranks) : 0)))
          return signalPassFailure();
      }
  }

  FailureOr<::moe::rt::RoutingProfile> readProfile(ModuleOp module) {
    auto text = llvm::MemoryBuffer::getFile(profile);
    if (!text) {
      module.emitError() << "moe-place-experts: cannot read the routing profile '" << profile
                         << "': " << text.getError().message();
      return failure();
    }
    auto parsed = ::moe::rt::parseRoutingProfile((*text)->getBuffer().str());
    if (!parsed) {
      module.emitError() << "moe-place-experts: " << profile << ": " << parsed.status().message();
      return failure();
    }
    auto type = module->getAttrOfType<StringAttr>("moe.model_type");
    if (type && type.getValue() != parsed->modelType) {
      module.emitError() << "moe-place-experts: " << profile << " profiles a "
                         << parsed->modelType << " model; this plan is " << type.getValue()
                         << " (profile it with this model's plan)";
      return failure();
    }
    return parsed.take();
  }

  /// Each rank's stacks of one layer: its routed experts as the placement
  /// library plans them from the profile's counts, then the always-on
  /// experts, on every rank as replicas (their rows spread over the ranks).
  FailureOr<std::vector<std::vector<Held>>>
  planLayer(plan::LaunchOp l, plan::ExpertsParamsAttr p, const std::map<int64_t, int64_t> &routed,
       const ::moe::rt::RoutingProfile &traffic) {
    const int64_t layer = p.getLayer(), stacked = p.getNumExperts() + p.getNumShared();
    auto router = routed.find(layer);
    if (layer < 0 || router == routed.end() || router->second > stacked) {
      l.emitOpError() << "has no router of its decoder layer in the program";
      return failure();
    }
    const int64_t experts = router->second;
    const ::moe::rt::RoutingProfile::Layer *counts = nullptr;
    for (const auto &pl : traffic.layers)
      if (pl.layer == layer)
        counts = &pl;
    if (!counts || int64_t(counts->counts.size()) != experts) {
      l.emitOpError() << "routes layer " << layer << " over " << experts
                      << " experts, but the routing profile '" << profile
                      << "' has no such layer (profile it with this model's plan)";
      return failure();
    }
    ::moe::placement::Options o;
    o.ranks = int(ranks);
    o.ranksPerNode = int(ranksPerNode);
    o.redundant = int(redundant);
    if (std::string why = ::moe::placement::checkOptions(int(experts), o); !why.empty()) {
      l.emitOpError() << "cannot place layer " << layer << ": " << why;
      return failure();
    }
    const ::moe::placement::Placement placed = ::moe::placement::balanced(counts->counts, o);
    std::vector<std::vector<Held>> share(static_cast<size_t>(ranks));
    for (auto &slots : share)
      slots.resize(size_t(placed.slotsPerRank));
    for (int64_t e = 0; e < experts; ++e) {
      // Replica numbers in rank order, as the plan's placement table lists them.
      std::vector<::moe::placement::Slot> copies = placed.experts[size_t(e)];
      llvm::sort(copies, [](auto a, auto b) { return a.rank < b.rank; });
      for (auto [i, s] : llvm::enumerate(copies))
        share[size_t(s.rank)][size_t(s.slot)] = {e, int64_t(i), int64_t(copies.size())};
    }
    for (int64_t rank = 0; rank < ranks; ++rank)
      for (int64_t e = experts; e < stacked; ++e)
        share[size_t(rank)].push_back({e, rank, ranks});
    return share;
  }
};

} // namespace
