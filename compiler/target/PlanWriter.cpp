//===- PlanWriter.cpp - plan dialect -> plan.moeplan + weights ------------===//
//
// Walks each rank's function of a planned module in order (one function,
// @main, for one rank; else one per rank with `plan.rank`): inputs, weights
// and arena buffers become the tensor table, launches and collectives the
// rank's instruction stream (with plan.record / plan.wait folded into the
// events instructions wait for and record, EventFolding.h), KV-cache
// declarations the cache spec. Each rank's weights are packed into a file
// of its own, streamed from the checkpoint; the plan file is written
// atomically once everything succeeded.
//
//===----------------------------------------------------------------------===//
#include "compiler/target/PlanWriter.h"
#include "compiler/import/HfConfig.h"
#include "compiler/import/PackedInt4.h"
#include "compiler/import/Safetensors.h"
#include "compiler/import/TextFiles.h"
#include "compiler/target/EventFolding.h"
#include "compiler/target/StagedDirectory.h"
#include "compiler/target/WeightPacker.h"
#include "dialects/moe/MoeOps.h"
#include "dialects/plan/PlanOps.h"
#include "moe/abi/Checksum.h"
#include "moe/abi/File.h"
#include "moe/abi/PlanFormat.h"
#include "moe/abi/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <deque>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>

namespace fb = ::moe::plan;
namespace pl = ::mlir::plan;
namespace fs = std::filesystem;
using namespace mlir;

namespace moe {

namespace {

[[noreturn]] void fail(Operation *op, const std::string &what) {
  std::string loc;
  llvm::raw_string_ostream os(loc);
  op->getLoc().print(os);
  throw InputError(loc + ": " + what);
}

fb::DType dtypeOf(Operation *op, Type t) {
  if (t.isF32()) return fb::DType::F32;
  if (t.isBF16()) return fb::DType::BF16;
  if (t.isF16()) return fb::DType::F16;
  if (t.isFloat8E4M3FN()) return fb::DType::F8E4M3;
  if (t.isInteger(32)) return fb::DType::I32;
  if (t.isInteger(8)) return fb::DType::I8;
  if (t.isInteger(4)) return fb::DType::I4;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  fail(op, "element type " + s + " has no plan dtype");
}

uint64_t elementBytes(fb::DType t) {
  return t == fb::DType::F32 || t == fb::DType::I32       ? 4
         : t == fb::DType::F8E4M3 || t == fb::DType::I8 ? 1
                                                         : 2;
}

std::string safetensorsDtype(fb::DType t) {
  switch (t) {
  case fb::DType::F32: return "F32";
  case fb::DType::BF16: return "BF16";
  case fb::DType::F16: return "F16";
  case fb::DType::F8E4M3: return "F8_E4M3";
  case fb::DType::I32: return "I32";
  case fb::DType::I8: return "I8";
  }
  return "?";
}

class Writer {
public:
  Writer(ModuleOp module, const PlanWriteOptions &options)
      : module_(module), options_(options) {}

  void run() {
    std::vector<func::FuncOp> ranks = rankPrograms();
    auto maxTokens = module_->getAttrOfType<IntegerAttr>("plan.max_batch_tokens");
    if (!maxTokens)
      throw InputError("the module has no memory plan; run moe-plan-memory first");
    maxTokens_ = maxTokens.getInt();
    // Every field is written, the version fields in particular, so that any
    // reader (and the corruption tests) finds them in place.
    b_.ForceDefaults(true);
    if (!options_.shapeOnly)
      catalog_ = openCheckpoint(
          options_.checkpointDir,
          HfConfig::load((fs::path(options_.checkpointDir) / "config.json").string()));
    programs_.resize(ranks.size());
    for (size_t r = 0; r < ranks.size(); ++r) {
      auto arena = ranks[r]->getAttrOfType<IntegerAttr>("plan.arena_bytes");
      if (!arena)
        fail(ranks[r], "the function has no memory plan; run moe-plan-memory first");
      cur_ = &programs_[r];
      cur_->arenaBytes = uint64_t(arena.getInt());
      for (Operation &op : ranks[r].getBody().front())
        visit(op);
    }
    // Written beside the target, moved into place by one rename: a reader of
    // the old plan keeps its mapped weights, and a failure or an interrupt
    // leaves the old plan as it was.
    StagedDirectory staged(options_.outputDir, rt::kPlanFileName, [](const std::string &name) {
      const std::string prefix = rt::kWeightFilePrefix;
      return name == rt::kPlanFileName ||
             (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() + 4 &&
              name.compare(name.size() - 4, 4, ".bin") == 0);
    });
    dir_ = staged.path();
    for (size_t r = 0; r < programs_.size(); ++r)
      packWeights(r);
    finishPlan();
    if (options_.cancelled && *options_.cancelled)
      throw InputError("interrupted");
    staged.commit();
  }

private:
  /// A launch or collective, until its events are all known.
  struct Instruction {
    fb::OpCode code = fb::OpCode(0);
    std::vector<uint32_t> ins, outs;
    fb::OpParams paramsType = fb::OpParams::NONE;
    flatbuffers::Offset<void> params;
    uint8_t stream = 0;
    std::string location;
    std::vector<uint32_t> waits;
    fb::CollectiveOp collective = fb::CollectiveOp::None;
    int32_t group = -1; // into groups_; -1: every rank
  };

  /// The module's functions in rank order: @main alone is rank 0; several
  /// functions each say their rank with `plan.rank`, 0 .. n-1.
  std::vector<func::FuncOp> rankPrograms() {
    auto fns = llvm::to_vector(module_.getOps<func::FuncOp>());
    if (fns.empty())
      throw InputError("the module has no function; run moe-to-plan first");
    if (fns.size() == 1 && !fns[0]->hasAttr("plan.rank")) {
      if (fns[0].getSymName() != "main")
        fail(fns[0], "the one function of a plan must be @main");
      return {fns[0]};
    }
    std::vector<func::FuncOp> ranks(fns.size());
    for (func::FuncOp fn : fns) {
      auto rank = fn->getAttrOfType<IntegerAttr>("plan.rank");
      if (!rank || rank.getInt() < 0 || rank.getInt() >= int64_t(fns.size()))
        fail(fn, "each function of a plan with " + std::to_string(fns.size()) +
                     " functions must say its rank with plan.rank = 0 .. " +
                     std::to_string(fns.size() - 1));
      if (ranks[size_t(rank.getInt())])
        fail(fn, "rank " + std::to_string(rank.getInt()) + " has two functions");
      ranks[size_t(rank.getInt())] = fn;
    }
    return ranks;
  }

  uint32_t addTensor(Value v, Operation *op, const std::string &name, fb::Storage storage,
                     uint64_t offset, uint64_t size) {
    auto type = cast<MemRefType>(v.getType());
    TensorDesc t{name, dtypeOf(op, type.getElementType()), {}, storage, offset, size, 0};
    for (int64_t i = 0; i < type.getRank(); ++i)
      t.shape.push_back(type.isDynamicDim(i) ? -1 : type.getDimSize(i));
    ids_[v] = uint32_t(tensors_.size());
    tensors_.push_back(std::move(t));
    return ids_[v];
  }

  uint32_t id(Operation *user, Value v) {
    auto it = ids_.find(v);
    if (it == ids_.end())
      fail(user, "uses a value that is not a plan tensor");
    return it->second;
  }

  void visit(Operation &op) {
    if (auto in = dyn_cast<pl::InputOp>(op)) {
      uint32_t i = addTensor(in, &op, in.getIndex() == 0 ? "tokens" : "positions",
                             fb::Storage::Input, 0, 0);
      cur_->inputs.resize(2);
      cur_->inputs[in.getIndex()] = i;
    } else if (auto w = dyn_cast<pl::WeightOp>(op)) {
      visitWeight(w);
    } else if (auto a = dyn_cast<pl::AllocOp>(op)) {
      if (!a.getOffset())
        fail(&op, "buffer has no arena offset; run moe-plan-memory first");
      auto type = cast<MemRefType>(a.getType());
      uint64_t bytes = elementBytes(dtypeOf(&op, type.getElementType()));
      for (int64_t i = 0; i < type.getRank(); ++i)
        bytes *= type.isDynamicDim(i) ? uint64_t(maxTokens_) : uint64_t(type.getDimSize(i));
      std::string name = "t" + std::to_string(tensors_.size());
      if (auto loc = dyn_cast<NameLoc>(op.getLoc()))
        name = loc.getName().str() + "/" + name;
      addTensor(a, &op, name, fb::Storage::Arena, *a.getOffset(), bytes);
    } else if (auto rows = dyn_cast<pl::RowsOp>(op)) {
      const uint32_t base = id(&op, rows.getBase());
      TensorDesc t = tensors_[base];
      t.name += "/part " + std::to_string(rows.getPart()) + " of " +
                std::to_string(rows.getParts());
      t.base = base;
      t.part = int32_t(rows.getPart());
      t.parts = int32_t(rows.getParts());
      ids_[rows] = uint32_t(tensors_.size());
      tensors_.push_back(std::move(t));
    } else if (auto kv = dyn_cast<pl::KvCacheOp>(op)) {
      kvLayers_[int64_t(kv.getLayer())] = {kv.getKind() == pl::KvKind::mla ? fb::KvKind::Mla
                                                                        : fb::KvKind::Gqa,
                                           int32_t(kv.getKWidth()),
                                           int32_t(kv.getVWidth())};
    } else if (auto l = dyn_cast<pl::LaunchOp>(op)) {
      visitLaunch(l);
    } else if (auto c = dyn_cast<pl::CollectiveOp>(op)) {
      visitCollective(c);
    } else if (auto r = dyn_cast<pl::RecordOp>(op)) {
      cur_->events.record(eventId(r.getEvent()), int(r.getStream()));
    } else if (auto w = dyn_cast<pl::WaitOp>(op)) {
      cur_->events.wait(eventId(w.getEvent()), int(w.getStream()));
    } else if (auto out = dyn_cast<pl::OutputOp>(op)) {
      cur_->outputs.push_back(id(&op, out.getValue()));
    } else if (!isa<func::ReturnOp>(op)) {
      fail(&op, "cannot be serialised into a plan");
    }
  }

  void visitWeight(pl::WeightOp w) {
    std::string name = w.getName().str();
    auto type = cast<MemRefType>(w.getType());
    fb::DType dtype = dtypeOf(w, type.getElementType());
    // Per expert (or once), each named tensor in turn: `concat` names
    // follow the first's rows.
    std::vector<std::string> names = {name};
    if (auto concat = w.getConcat())
      for (mlir::Attribute a : *concat)
        names.push_back(cast<StringAttr>(a).getValue().str());
    Pending pending;
    Encoding &e = pending.encoding;
    e.dtype = dtype;
    e.cols = type.getShape().back();
    e.group = w.getGroup() ? int64_t(*w.getGroup()) : 0;
    e.panels = w.getPanels(); // the verifier allows them on f32, bf16, f16 only
    if (dtype == fb::DType::F8E4M3 && !w.getScale())
      e.rowGroup = e.group; // encoded fp8: square blocks
    const uint64_t rows = uint64_t(type.getNumElements() / e.cols);
    bool perExpert = name.find("{e}") != std::string::npos;
    // The {e} experts, then whole tensors appended as further experts.
    std::vector<std::string> appended;
    if (auto append = w.getAppend())
      for (mlir::Attribute a : *append)
        appended.push_back(cast<StringAttr>(a).getValue().str());
    // Expert parallelism: the listed experts of the stack, in that order.
    const int64_t held = perExpert ? type.getDimSize(0) : 1;
    std::vector<int64_t> experts(static_cast<size_t>(held));
    std::iota(experts.begin(), experts.end(), 0);
    if (auto list = w.getExperts())
      experts.assign(list->begin(), list->end());
    const int64_t stacked = w.getStacked() ? int64_t(*w.getStacked()) : held;
    const int64_t count = stacked - int64_t(appended.size() / names.size());
    const uint64_t partElements =
        uint64_t(type.getNumElements()) / uint64_t(held) / names.size();
    // A shape-only plan has the layout the IR states and no tensors to read.
    for (int64_t ex : options_.shapeOnly ? std::vector<int64_t>() : experts)
      for (size_t n = 0; n < names.size(); ++n) {
        std::string part = ex < count ? mlir::moe::WeightOp::expand(names[n], ex)
                                      : appended[size_t(ex - count) * names.size() + n];
        const TensorInfo *info = catalog_.find(part);
        if (!info)
          fail(w, catalog_.source() + ": tensor '" + part + "' is missing");
        if (w.getRows() || w.getCols())
          info = slice(w, *info);
        uint64_t numel = 1;
        for (int64_t d : info->shape)
          numel *= uint64_t(d);
        pending.parts.push_back(info);
        if (info->packed) { // a GPTQ/AWQ layer: read as the plan's integers, or not at all
          const bool int8 = info->packed->int8();
          if (dtype != (int8 ? fb::DType::I8 : fb::DType::I4) || e.group != info->packed->group ||
              numel != partElements)
            fail(w, info->file + ": tensor '" + part + "' is a quantized layer of " +
                        shapeString(info->shape) + " in groups of " +
                        std::to_string(info->packed->group) + ", which the plan can store only as " +
                        (int8 ? "int8 (w8a8)" : "int4 (w4a8)") + " in those groups");
          continue;
        }
        // Stored as in the checkpoint, or converted from a dtype we decode.
        pending.convert |= info->dtype != safetensorsDtype(dtype);
        if (numel != partElements || info->size != numel * dtypeSize(info->dtype) ||
            (info->dtype != safetensorsDtype(dtype) && !canDecode(info->dtype)))
          fail(w, info->file + ": tensor '" + part + "' is " + info->dtype + " " +
                      shapeString(info->shape) + ", which does not match the IR");
        if (w.getScale())
          pending.checkpointScales.push_back(checkpointScale(w, ex, *info));
      }
    const size_t packed = size_t(std::count_if(pending.parts.begin(), pending.parts.end(),
                                               [](const TensorInfo *t) { return t->packed; }));
    if (packed && packed != pending.parts.size())
      fail(w, "weight '" + name + "' joins GPTQ/AWQ layers and plain tensors, which the plan "
                  "cannot store as one weight without rounding the checkpoint's values again");
    pending.packedInt4 = packed > 0;
    if (w.getScale()) { // fp8 as stored, with its block scales stacked
      e.rowGroup = (*w.getBlock())[0];
      e.group = (*w.getBlock())[1];
    }
    if (w.getScale() && !options_.shapeOnly) {
      // Each checkpoint matrix has its own block grid; stacked, they form
      // the plan's one grid only when every matrix fills whole blocks.
      const TensorInfo &first = *pending.parts.front();
      const int64_t matrixRows = first.shape.size() >= 2 ? first.shape[first.shape.size() - 2] : 1;
      const uint64_t matrices = pending.parts.size() * (partElements / uint64_t(matrixRows * e.cols));
      if (matrices > 1 && matrixRows % e.rowGroup)
        fail(w, "weight '" + name + "' stacks tensors of " + std::to_string(matrixRows) +
                    " rows, not a multiple of its scale block's " + std::to_string(e.rowGroup) +
                    " rows, so their block scales do not stack");
    }
    const uint64_t bytes = e.bytes(rows);
    pending.tensor = addTensor(w, w, name, fb::Storage::Weight, 0, bytes);
    tensors_[pending.tensor].weightFile = rankOf(cur_);
    tensors_[pending.tensor].layout = e.panels ? fb::Layout::Panels8 : fb::Layout::Rows;
    cur_->weightBytes += bytes;
    if (e.quantized()) {
      // The scales: a second weight tensor the quantized one names.
      const uint64_t blockRows = (rows + uint64_t(e.rowGroup) - 1) / uint64_t(e.rowGroup);
      TensorDesc scales{name + ".scales", fb::DType::F32,
                        {int64_t(blockRows), e.groups()}, fb::Storage::Weight, 0,
                        blockRows * uint64_t(e.groups()) * 4, 0};
      scales.weightFile = rankOf(cur_);
      pending.scales = uint32_t(tensors_.size());
      tensors_.push_back(scales);
      tensors_[pending.tensor].scales = pending.scales;
      tensors_[pending.tensor].group = int32_t(e.group);
      tensors_[pending.tensor].rowGroup = int32_t(e.rowGroup);
      tensors_[pending.tensor].int8Activations = w.getInt8Activations(); // w8a8
      cur_->weightBytes += scales.size;
    }
    cur_->pending.push_back(std::move(pending));
  }

  static float f32(FloatAttr a) { return float(a.getValueAsDouble()); }

  flatbuffers::Offset<fb::Rope> rope(pl::RopeAttr r) {
    std::vector<float> freq(r.getInvFreq().asArrayRef().begin(),
                            r.getInvFreq().asArrayRef().end());
    return fb::CreateRopeDirect(b_, &freq, f32(r.getAttentionFactor()),
                                r.getInterleaved().getValue());
  }

  static fb::Scoring scoringOf(mlir::moe::Scoring s) {
    return s == mlir::moe::Scoring::sigmoid ? fb::Scoring::Sigmoid : fb::Scoring::Softmax;
  }
  static fb::TopkMethod methodOf(mlir::moe::TopkMethod m) {
    switch (m) {
    case mlir::moe::TopkMethod::greedy: return fb::TopkMethod::Greedy;
    case mlir::moe::TopkMethod::group_limited_greedy: return fb::TopkMethod::GroupLimitedGreedy;
    case mlir::moe::TopkMethod::noaux_tc: return fb::TopkMethod::NoAuxTc;
    }
    return fb::TopkMethod::Greedy;
  }
  static fb::RoutingPolicy policyOf(mlir::moe::RoutingPolicy p) {
    switch (p) {
    case mlir::moe::RoutingPolicy::token_choice: return fb::RoutingPolicy::TokenChoice;
    case mlir::moe::RoutingPolicy::capacity: return fb::RoutingPolicy::Capacity;
    case mlir::moe::RoutingPolicy::expert_choice: return fb::RoutingPolicy::ExpertChoice;
    }
    return fb::RoutingPolicy::TokenChoice;
  }

  /// The launch's typed parameters as their plan.fbs table (the verifier
  /// has checked the kind matches the kernel).
  std::pair<fb::OpParams, flatbuffers::Offset<void>> params(pl::LaunchOp l) {
    Attribute a = l.getParamsAttr();
    if (auto p = dyn_cast_or_null<pl::RmsNormParamsAttr>(a))
      return {fb::OpParams::RmsNormParams, fb::CreateRmsNormParams(b_, f32(p.getEps())).Union()};
    if (auto p = dyn_cast_or_null<pl::AttentionParamsAttr>(a)) {
      auto r = rope(p.getRope());
      return {fb::OpParams::AttentionParams,
              fb::CreateAttentionParams(b_, int32_t(p.getLayer()), int32_t(p.getNumHeads()),
                                        int32_t(p.getNumKvHeads()), int32_t(p.getHeadDim()),
                                        f32(p.getScale()), r, int32_t(p.getSlidingWindow()),
                                        f32(p.getQkNormEps()))
                  .Union()};
    }
    if (auto p = dyn_cast_or_null<pl::MlaParamsAttr>(a)) {
      auto r = rope(p.getRope());
      return {fb::OpParams::MlaParams,
              fb::CreateMlaParams(b_, int32_t(p.getLayer()), int32_t(p.getNumHeads()),
                                  int32_t(p.getKvLoraRank()), int32_t(p.getQkNopeHeadDim()),
                                  int32_t(p.getQkRopeHeadDim()), int32_t(p.getVHeadDim()),
                                  f32(p.getScale()), r, f32(p.getNormEps()))
                  .Union()};
    }
    if (auto p = dyn_cast_or_null<pl::RouterParamsAttr>(a)) {
      cur_->routers[int(p.getLayer())] = int(p.getNumExperts());
      return {fb::OpParams::RouterParams,
              fb::CreateRouterParams(b_, int32_t(p.getNumExperts()), int32_t(p.getTopK()),
                                     scoringOf(p.getScoring()), methodOf(p.getMethod()),
                                     p.getNormTopkProb().getValue(), int32_t(p.getNGroup()),
                                     int32_t(p.getTopkGroup()),
                                     f32(p.getRoutedScalingFactor()), int32_t(p.getLayer()),
                                     policyOf(p.getPolicy()),
                                     p.getCapacityFactor() ? f32(p.getCapacityFactor()) : 1.0f)
                  .Union()};
    }
    if (auto p = dyn_cast_or_null<pl::ExpertsParamsAttr>(a)) {
      auto ints = [&](mlir::DenseI64ArrayAttr a) {
        std::vector<int32_t> v;
        if (a)
          for (int64_t x : a.asArrayRef())
            v.push_back(int32_t(x));
        return v;
      };
      const std::vector<int32_t> held = ints(p.getHeld()), replicas = ints(p.getReplicas()),
                                 replica = ints(p.getReplica());
      if (p.getStacked() && p.getLayer() >= 0)
        cur_->held[int(p.getLayer())] = held;
      auto vec = [&](const std::vector<int32_t> &v) {
        return v.empty() ? 0 : b_.CreateVector(v);
      };
      return {fb::OpParams::ExpertsParams,
              fb::CreateExpertsParams(b_, int32_t(p.getNumExperts()),
                                      int32_t(p.getIntermediate()),
                                      p.getFusedGateUp().getValue(), int32_t(p.getNumShared()),
                                      p.getGrouped().getValue(), 0, int32_t(p.getStacked()),
                                      int32_t(p.getLayer()), vec(held), vec(replicas),
                                      vec(replica))
                  .Union()};
    }
    if (auto p = dyn_cast_or_null<pl::DispatchParamsAttr>(a))
      return {fb::OpParams::DispatchParams,
              fb::CreateDispatchParams(b_, int32_t(p.getNumExperts()), int32_t(p.getNumShared()))
                  .Union()};
    return {fb::OpParams::NONE, 0};
  }

  /// The instruction of `op`, reading `ins` and writing `outs` on `stream`.
  /// The events it records are known only later (a plan.record after it):
  /// the table is built in finishPlan.
  Instruction &addInstruction(Operation *op, ValueRange ins, ValueRange outs, int64_t stream) {
    Instruction inst{};
    for (Value v : ins)
      inst.ins.push_back(id(op, v));
    for (Value v : outs)
      inst.outs.push_back(id(op, v));
    llvm::raw_string_ostream os(inst.location);
    op->getLoc().print(os);
    inst.stream = uint8_t(stream);
    inst.waits = cur_->events.launch(int(stream));
    cur_->instructions.push_back(std::move(inst));
    return cur_->instructions.back();
  }

  void visitLaunch(pl::LaunchOp l) {
    Instruction &inst = addInstruction(l, l.getIns(), l.getOuts(), l.getStream());
    // Kernel values are the plan's op codes (both from Kernels.def).
    inst.code = fb::OpCode(l.getKernel().getKernel());
    std::tie(inst.paramsType, inst.params) = params(l);
  }

  void visitCollective(pl::CollectiveOp c) {
    pl::GroupAttr group = c.getGroupAttr();
    if (group && group.getRanks().back() >= int64_t(programs_.size()))
      fail(c, "its group names rank " + std::to_string(group.getRanks().back()) +
                  ", but the module has " + std::to_string(programs_.size()) + " rank(s)");
    // The ranks it spans: its group's, else every rank.
    const auto ranks = group ? int64_t(group.getRanks().size()) : int64_t(programs_.size());
    auto in = cast<MemRefType>(c.getIns()[0].getType()),
         out = cast<MemRefType>(c.getOuts()[0].getType());
    if (c.getKind() == pl::CollectiveKind::all_gather && out.getDimSize(0) != ranks)
      fail(c, "'all_gather' gives [ranks, ...]: its output's dimension 0 must be the module's " +
                  std::to_string(ranks) + " rank(s)");
    if (c.getKind() == pl::CollectiveKind::all_to_all_v) {
      const bool sends = c.getIns().size() == 2;
      const int64_t local = (sends ? in : out).getDimSize(1),
                    all = (sends ? out : in).getDimSize(1);
      if (all != ranks * local)
        fail(c, "'all_to_all_v' exchanges rows [T, P, H] as [T, ranks x P, H]: " +
                    std::to_string(all) + " is not the module's " + std::to_string(ranks) +
                    " rank(s) x " + std::to_string(local));
    }
    Instruction &inst = addInstruction(c, c.getIns(), c.getOuts(), c.getStream());
    inst.collective = fb::CollectiveOp(c.getKind()); // the same numbers (checked below)
    if (group)
      inst.group = int32_t(groups_.try_emplace(group, groups_.size()).first->second);
  }

  /// Plan.groups, in the order collectives first named them.
  std::vector<flatbuffers::Offset<fb::Group>> groupTable() {
    std::vector<pl::GroupAttr> order(groups_.size());
    for (auto [group, index] : groups_)
      order[index] = group;
    std::vector<flatbuffers::Offset<fb::Group>> table;
    for (pl::GroupAttr g : order) {
      std::vector<int32_t> ranks(g.getRanks().begin(), g.getRanks().end());
      table.push_back(fb::CreateGroupDirect(b_, fb::GroupKind(g.getKind()), &ranks));
    }
    return table;
  }


  int64_t eventId(Value event) {
    return eventIds_.try_emplace(event, int64_t(eventIds_.size())).first->second;
  }

  /// A shape-only plan: each weight's place in a file that is not written.
  void layOutWeights(size_t rank) {
    Program &program = programs_[rank];
    uint64_t end = 0;
    auto place = [&](uint32_t tensor) {
      end = (end + rt::kWeightAlignment - 1) / rt::kWeightAlignment * rt::kWeightAlignment;
      tensors_[tensor].offset = end;
      end += tensors_[tensor].size;
    };
    for (const Pending &w : program.pending) {
      place(w.tensor);
      if (w.encoding.quantized())
        place(w.scales);
    }
    program.weightFileSize = end;
    program.weightFile = std::string(rt::kWeightFilePrefix) + std::to_string(rank) + ".bin";
  }

  void packWeights(size_t rank) {
    if (options_.shapeOnly)
      return layOutWeights(rank);
    Program &program = programs_[rank];
    std::string file = std::string(rt::kWeightFilePrefix) + std::to_string(rank) + ".bin";
    WeightPacker packer((fs::path(dir_) / file).string(), program.weightBytes,
                        options_.cancelled);
    auto place = [&](uint32_t tensor, const WeightPacker::Packed &p) {
      tensors_[tensor].offset = p.offset;
      tensors_[tensor].checksum = p.checksum;
    };
    for (const Pending &w : program.pending) {
      // The data as stored or encoded; the scales from the checkpoint (fp8
      // as stored) or from the encoder.
      std::vector<float> scales;
      const bool encode = w.checkpointScales.empty() && (w.convert || w.encoding.quantized());
      place(w.tensor, w.packedInt4 ? packer.appendPackedInt4(w.parts, scales)
                      : encode     ? packer.appendEncoded(w.parts, w.encoding, scales)
                                   : packer.append(w.parts, w.encoding.panels ? w.encoding.cols : 0));
      for (const TensorInfo *s : w.checkpointScales)
        packer.decode(*s, scales);
      if (w.encoding.quantized())
        place(w.scales, packer.appendBytes(scales.data(), scales.size() * sizeof(float)));
    }
    program.weightFileSize = packer.finish();
    program.weightFile = file;
  }

  std::string checkpointHash() {
    rt::Checksum64 sum;
    auto text = rt::readFile((fs::path(options_.checkpointDir) / "config.json").string());
    if (!text)
      throw InputError(text.status().message());
    sum.update(text->data(), text->size());
    for (auto &[name, info] : catalog_.tensors()) {
      std::ostringstream os;
      os << name << ' ' << info.dtype << ' ' << shapeString(info.shape) << ' '
         << info.size << '\n';
      std::string line = os.str();
      sum.update(line.data(), line.size());
    }
    std::ostringstream hex;
    hex << std::hex << sum.value();
    return hex.str();
  }

  void finishPlan() {
    std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
    for (const TensorDesc &t : tensors_)
      tensors.push_back(fb::CreateTensorDirect(b_, t.name.c_str(), t.dtype, &t.shape,
                                               t.storage, t.weightFile, t.offset, t.size,
                                               t.checksum, t.scales, t.group, t.rowGroup,
                                               t.base, t.part, t.parts, t.int8Activations,
                                               t.layout));
    std::vector<flatbuffers::Offset<fb::KvLayer>> layers;
    for (auto &[layer, spec] : kvLayers_) {
      if (layer != int64_t(layers.size()))
        throw InputError("KV-cache layers must be numbered 0, 1, ...; layer " +
                         std::to_string(layers.size()) + " is missing");
      layers.push_back(fb::CreateKvLayer(b_, std::get<0>(spec), std::get<1>(spec),
                                         std::get<2>(spec)));
    }
    auto maxContext = module_->getAttrOfType<IntegerAttr>("plan.max_context");
    auto kv = fb::CreateKvCacheSpecDirect(b_, options_.kvDtype,
                                          maxContext ? int32_t(maxContext.getInt()) : 4096,
                                          &layers);
    auto config = module_->getAttrOfType<DictionaryAttr>("moe.config");
    auto type = module_->getAttrOfType<StringAttr>("moe.model_type");
    auto get = [&](StringRef key) -> int32_t {
      auto a = config ? config.getAs<IntegerAttr>(key) : IntegerAttr();
      return a ? int32_t(a.getInt()) : 0;
    };
    auto tokenizer = config ? config.getAs<StringAttr>("tokenizer") : StringAttr();
    auto eos = config ? config.getAs<IntegerAttr>("eos_token_id") : IntegerAttr();
    auto eosList = config ? config.getAs<DenseI64ArrayAttr>("eos_token_ids")
                          : DenseI64ArrayAttr();
    std::vector<int32_t> eosIds;
    if (eosList)
      for (int64_t id : eosList.asArrayRef())
        eosIds.push_back(int32_t(id));
    auto modelConfig = fb::CreateModelConfigDirect(
        b_, type ? type.str().c_str() : "", get("vocab_size"), get("hidden_size"),
        get("num_layers"), get("num_experts"), get("top_k"),
        get("max_position_embeddings"), tokenizer ? tokenizer.str().c_str() : "",
        eos ? int32_t(eos.getInt()) : -1, &eosIds);
    std::vector<flatbuffers::Offset<fb::WeightFile>> files;
    std::vector<flatbuffers::Offset<fb::Program>> programs;
    for (size_t r = 0; r < programs_.size(); ++r) {
      const Program &prog = programs_[r];
      files.push_back(fb::CreateWeightFileDirect(b_, prog.weightFile.c_str(),
                                                 prog.weightFileSize, int32_t(r)));
      std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
      for (size_t i = 0; i < prog.instructions.size(); ++i) {
        const Instruction &in = prog.instructions[i];
        std::vector<uint32_t> records = prog.events.records(i);
        instructions.push_back(fb::CreateInstructionDirect(
            b_, in.code, &in.ins, &in.outs, in.paramsType, in.params, in.stream,
            in.location.c_str(), in.waits.empty() ? nullptr : &in.waits,
            records.empty() ? nullptr : &records, in.collective, in.group));
      }
      programs.push_back(fb::CreateProgramDirect(b_, int32_t(r), &instructions, &prog.inputs,
                                                 &prog.outputs, prog.arenaBytes,
                                                 prog.weightBytes));
    }
    auto placement = placementTable();
    auto groups = groupTable();
    std::string hash = checkpointHash();
    std::string source = fs::absolute(options_.checkpointDir).lexically_normal().string();
    std::string compiler = std::string("moe-compiler ") + rt::version() + " (commit " +
                           rt::gitCommit() + ")";
    auto provenance = fb::CreateProvenanceDirect(b_, compiler.c_str(),
                                                 options_.pipeline.c_str(), source.c_str(),
                                                 hash.c_str(), options_.shapeOnly);
    TextFiles text = readTextFiles((fs::path(options_.checkpointDir) / "config.json").string());
    auto textSpec = fb::CreateTextSpecDirect(b_, text.tokenizerJson.c_str(),
                                             text.chatTemplate.c_str(), text.bosToken.c_str(),
                                             text.eosToken.c_str());
    auto plan = fb::CreatePlanDirect(b_, rt::kFormatMajor, rt::kFormatMinor, modelConfig,
                                     &tensors, &files, &programs, int32_t(maxTokens_), kv,
                                     provenance, &placement, textSpec, rt::kWeightChecksum,
                                     groups.empty() ? nullptr : &groups);
    fb::FinishPlanBuffer(b_, plan);
    auto out = rt::OutputFile::create((fs::path(dir_) / rt::kPlanFileName).string());
    if (!out)
      throw InputError(out.status().message());
    const std::string trailer = rt::planTrailer(b_.GetBufferPointer(), b_.GetSize());
    for (rt::Status st : {out->write(b_.GetBufferPointer(), b_.GetSize()),
                          out->write(trailer.data(), trailer.size()), out->close()})
      if (!st)
        throw InputError(st.message());
  }

  ModuleOp module_;
  const PlanWriteOptions &options_;
  std::string dir_; ///< where the files go: the staging directory
  TensorCatalog catalog_;
  std::deque<TensorInfo> slices_; ///< views of checkpoint tensors the plan slices
  flatbuffers::FlatBufferBuilder b_;
  int64_t maxTokens_ = 0;
  llvm::DenseMap<Value, uint32_t> ids_;
  struct TensorDesc {
    std::string name;
    fb::DType dtype;
    std::vector<int64_t> shape;
    fb::Storage storage;
    uint64_t offset, size, checksum;
    uint32_t scales = 0; ///< scaled types: the tensor of its scales
    uint32_t weightFile = 0; ///< weights: its rank's file
    int32_t group = 0, rowGroup = 1;
    uint32_t base = 0; ///< a micro-batch: the tensor it is rows of
    int32_t part = 0, parts = 1;
    bool int8Activations = false; ///< w8a8 (format 2.7): an I8 weight with row scales
    fb::Layout layout = fb::Layout::Rows; ///< format 2.8
  };
  /// A weight to pack: its checkpoint parts in order, and how to store them.
  struct Pending {
    uint32_t tensor = 0, scales = 0;
    std::vector<const TensorInfo *> parts;
    Encoding encoding;
    bool convert = false; ///< the checkpoint's dtype differs from the plan's
    bool packedInt4 = false; ///< GPTQ/AWQ layers, read as they are (PackedInt4.h)
    /// fp8 checkpoint weights: each part's block scale tensor, in order.
    std::vector<const TensorInfo *> checkpointScales;
  };

  /// The rows and columns of checkpoint tensor `t` that `w` keeps (tensor
  /// parallelism), as a view the packer reads.
  const TensorInfo *slice(pl::WeightOp w, const TensorInfo &t) {
    const size_t rank = t.shape.size();
    const unsigned elem = dtypeSize(t.dtype);
    if ((rank != 1 && rank != 2) || (w.getCols() && rank != 2) || (!elem && !t.packed))
      fail(w, t.file + ": tensor of " + shapeString(t.shape) + " " + t.dtype +
                  ": only matrices and vectors are sliced");
    const int64_t rows = t.shape[0], cols = rank == 2 ? t.shape[1] : 1;
    int64_t r0 = 0, nr = rows, c0 = 0, nc = cols;
    if (auto r = w.getRows())
      r0 = (*r)[0], nr = (*r)[1];
    if (auto c = w.getCols())
      c0 = (*c)[0], nc = (*c)[1];
    if (r0 + nr > rows || c0 + nc > cols)
      fail(w, t.file + ": tensor of " + shapeString(t.shape) + " has no rows [" +
                  std::to_string(r0) + ", " + std::to_string(r0 + nr) + ") and columns [" +
                  std::to_string(c0) + ", " + std::to_string(c0 + nc) + ")");
    if (t.packed) {
      slices_.push_back(slicePackedInt4(t, r0, nr, c0, nc));
      return &slices_.back();
    }
    if (t.size != uint64_t(rows) * uint64_t(cols) * elem)
      fail(w, t.file + ": tensor of " + shapeString(t.shape) + " " + t.dtype + " holds " +
                  std::to_string(t.size) + " bytes");
    TensorInfo v = t;
    v.shape = rank == 2 ? std::vector<int64_t>{nr, nc} : std::vector<int64_t>{nr};
    v.offset = t.offset + (uint64_t(r0) * uint64_t(cols) + uint64_t(c0)) * elem;
    v.size = uint64_t(nr) * uint64_t(nc) * elem;
    v.rowPitch = nc == cols ? 0 : uint64_t(cols) * elem;
    slices_.push_back(std::move(v));
    return &slices_.back();
  }

  /// The block-scale tensor of part `expert` (`data`) of an fp8 checkpoint
  /// weight: a grid of blocks per matrix (the last two dimensions).
  const TensorInfo *checkpointScale(pl::WeightOp w, int64_t expert, const TensorInfo &data) {
    std::string name = mlir::moe::WeightOp::expand(w.getScale()->str(), expert);
    const TensorInfo *info = catalog_.find(name);
    if (!info)
      fail(w, catalog_.source() + ": scale tensor '" + name + "' is missing");
    ArrayRef<int64_t> block = *w.getBlock();
    std::vector<int64_t> want = data.shape;
    if (want.size() < 2)
      want.insert(want.begin(), 1);
    int64_t &rows = want[want.size() - 2], &cols = want.back();
    rows = (rows + block[0] - 1) / block[0];
    cols = (cols + block[1] - 1) / block[1];
    if (info->shape != want || !canDecode(info->dtype))
      fail(w, info->file + ": scale tensor '" + name + "' is " + info->dtype + " " +
                  shapeString(info->shape) + "; expected F32 " + shapeString(want));
    return info;
  }
  std::vector<TensorDesc> tensors_;
  /// One rank's program, its weights and its memory.
  struct Program {
    std::vector<uint32_t> inputs, outputs;
    std::vector<Instruction> instructions;
    EventFolding events;
    std::vector<Pending> pending;
    uint64_t arenaBytes = 0, weightBytes = 0, weightFileSize = 0;
    std::string weightFile;
    std::map<int, int> routers; ///< decoder layer -> its router's experts
    /// decoder layer -> the stacked expert of each of its stacks, when sharded
    std::map<int, std::vector<int32_t>> held;
  };
  uint32_t rankOf(const Program *p) const { return uint32_t(p - programs_.data()); }

  /// Each routed expert's slots: on every rank that routes its layer, slot
  /// e, unless the rank's expert rows hold a share of the stack (expert
  /// parallelism), then at each of its stacks that holds e, ranks in order.
  std::vector<flatbuffers::Offset<fb::LayerPlacement>> placementTable() {
    std::map<int, std::pair<int, std::vector<int32_t>>> layers; // experts, ranks
    for (size_t r = 0; r < programs_.size(); ++r)
      for (auto [layer, experts] : programs_[r].routers) {
        auto &entry = layers[layer];
        if (!entry.second.empty() && entry.first != experts)
          throw InputError("layer " + std::to_string(layer) + " routes over " +
                           std::to_string(experts) + " experts on rank " + std::to_string(r) +
                           " but " + std::to_string(entry.first) + " on another");
        entry.first = experts;
        entry.second.push_back(int32_t(r));
      }
    std::vector<flatbuffers::Offset<fb::LayerPlacement>> out;
    for (auto &[layer, entry] : layers) {
      std::vector<flatbuffers::Offset<fb::ExpertSlots>> experts;
      for (int32_t e = 0; e < entry.first; ++e) {
        std::vector<fb::ExpertSlot> slots;
        for (int32_t rank : entry.second) {
          const auto &held = programs_[size_t(rank)].held;
          auto slice = held.find(layer);
          if (slice == held.end())
            slots.emplace_back(rank, e);
          else
            for (size_t i = 0; i < slice->second.size(); ++i)
              if (slice->second[i] == e)
                slots.emplace_back(rank, int32_t(i));
        }
        experts.push_back(fb::CreateExpertSlotsDirect(b_, &slots));
      }
      out.push_back(fb::CreateLayerPlacementDirect(b_, layer, &experts));
    }
    return out;
  }

  std::vector<Program> programs_;
  Program *cur_ = nullptr; ///< the one being visited
  llvm::DenseMap<Value, int64_t> eventIds_;
  llvm::DenseMap<pl::GroupAttr, size_t> groups_; // -> its index in Plan.groups
  std::map<int64_t, std::tuple<fb::KvKind, int32_t, int32_t>> kvLayers_;
};

} // namespace

// The dialect's collective kinds number plan.fbs's CollectiveOp.
static_assert(int(pl::CollectiveKind::all_reduce) == int(fb::CollectiveOp::AllReduce) &&
                  int(pl::CollectiveKind::all_gather) == int(fb::CollectiveOp::AllGather) &&
                  int(pl::CollectiveKind::all_to_all_v) == int(fb::CollectiveOp::AllToAllV) &&
                  int(fb::CollectiveOp::MAX) == int(fb::CollectiveOp::AllToAllV),
              "plan.fbs's CollectiveOp and the plan dialect's CollectiveKind differ");
// ... and its group kinds plan.fbs's GroupKind.
static_assert(int(pl::GroupKind::tensor) == int(fb::GroupKind::Tensor) &&
                  int(pl::GroupKind::data) == int(fb::GroupKind::Data) &&
                  int(pl::GroupKind::expert) == int(fb::GroupKind::Expert) &&
                  int(fb::GroupKind::MAX) == int(fb::GroupKind::Expert),
              "plan.fbs's GroupKind and the plan dialect's GroupKind differ");

bool writePlan(ModuleOp module, const PlanWriteOptions &options, std::string &error) {
  try {
    Writer(module, options).run();
    return true;
  } catch (const InputError &e) {
    error = e.what();
  } catch (const fs::filesystem_error &e) {
    error = e.what();
  } catch (const nlohmann::json::exception &e) {
    // config.json, re-read for its quantization_config: a value of an
    // unexpected kind that a reader did not name.
    error = options.checkpointDir + ": malformed JSON in the checkpoint: " + e.what();
  }
  if (options.cancelled && *options.cancelled)
    error = "interrupted by a signal; " + options.outputDir + " was left as it was";
  return false;
}

} // namespace moe
