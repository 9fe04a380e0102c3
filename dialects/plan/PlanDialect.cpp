//===- PlanDialect.cpp - plan dialect, ops and verifiers -----------------===//
#include "dialects/plan/PlanDialect.h"
#include "dialects/plan/PlanOps.h"
#include "moe/abi/KernelCall.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::plan;

#include "dialects/plan/PlanDialect.cpp.inc"
#include "dialects/plan/PlanEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/plan/PlanTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.cpp.inc"

void PlanDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/plan/PlanTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/plan/PlanAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/plan/PlanOps.cpp.inc"
      >();
}

namespace {

/// Parses a kernel's name (Kernels.def's spelling); a name not in the list
/// is an error that lists them.
ParseResult parseKernel(AsmParser &parser, Kernel &kernel) {
  llvm::SMLoc at = parser.getCurrentLocation();
  std::string name;
  if (parser.parseKeywordOrString(&name))
    return failure();
  if (auto k = symbolizeKernel(name)) {
    kernel = *k;
    return success();
  }
  std::string known;
  for (unsigned i = 0; i < kernelCount(); ++i)
    known += (i ? ", " : "") + kernelInfo(Kernel(i)).name.str();
  return parser.emitError(at) << "unknown kernel '" << name << "' (kernels: " << known << ")";
}

} // namespace

Attribute KernelAttr::parse(AsmParser &parser, Type) {
  Kernel kernel;
  if (parser.parseLess() || parseKernel(parser, kernel) || parser.parseGreater())
    return {};
  return KernelAttr::get(parser.getContext(), kernel);
}

void KernelAttr::print(AsmPrinter &printer) const {
  printer << "<" << kernelInfo(getKernel()).name << ">";
}

/// `plan.launch linear ...`: the kernel as a bare name.
static ParseResult parseKernelName(OpAsmParser &parser, KernelAttr &kernel) {
  Kernel k;
  if (parseKernel(parser, k))
    return failure();
  kernel = KernelAttr::get(parser.getContext(), k);
  return success();
}

static void printKernelName(OpAsmPrinter &printer, Operation *, KernelAttr kernel) {
  printer << kernelInfo(kernel.getKernel()).name;
}

static LogicalResult checkStream(Operation *op, int64_t stream) {
  if (stream < 0 || stream > 255)
    return op->emitOpError() << "stream must be in [0, 255], got " << stream;
  return success();
}

LogicalResult WeightOp::verify() {
  if (getConcat() && (getConcat()->empty() || getScale()))
    return emitOpError() << "weight '" << getName()
                         << "' may concatenate one or more unscaled tensors only";
  if (getScale().has_value() != getBlock().has_value())
    return emitOpError() << "weight '" << getName()
                         << "' needs both 'scale' and 'block' or neither";
  if (getBlock() && (getBlock()->size() != 2 || (*getBlock())[0] <= 0 ||
                     (*getBlock())[1] <= 0))
    return emitOpError() << "block of weight '" << getName()
                         << "' must be two positive sizes";
  auto type = cast<MemRefType>(getType());
  if (auto experts = getExperts()) {
    const bool stack = getName().contains("{e}") || getAppend();
    const int64_t stacked = getStacked() ? int64_t(*getStacked()) : 0;
    llvm::SmallDenseSet<int64_t> seen;
    bool valid = stack && type.getRank() >= 1 && type.getDimSize(0) == int64_t(experts->size());
    for (int64_t e : *experts)
      valid &= e >= 0 && e < stacked && seen.insert(e).second;
    if (!valid)
      return emitOpError() << "weight '" << getName() << "' of " << type
                           << " cannot hold experts " << getExpertsAttr() << " of " << stacked
                           << " (a stack of experts: as many distinct experts as dim 0, each "
                              "in [0, stacked))";
  }
  for (auto [what, slice] : {std::pair("rows", getRows()), std::pair("cols", getCols())}) {
    if (!slice)
      continue;
    if (slice->size() != 2 || (*slice)[0] < 0 || (*slice)[1] < 1)
      return emitOpError() << what << " of weight '" << getName()
                           << "' must be [start, count] with start >= 0 and count >= 1";
    if (getScale())
      return emitOpError() << "weight '" << getName()
                           << "' carries the checkpoint's block scales and cannot be sliced";
  }
  // The sliced dimensions: each named matrix's rows (all parts stacked
  // along them) and its columns.
  const int64_t parts = 1 + (getConcat() ? int64_t(getConcat()->size()) : 0);
  if (auto rows = getRows()) {
    const int64_t dim = type.getRank() >= 2 ? type.getRank() - 2 : 0;
    if (type.getRank() < 1 || type.getDimSize(dim) != (*rows)[1] * parts)
      return emitOpError() << "weight '" << getName() << "' of " << type << " cannot hold "
                           << (*rows)[1] << " rows of each of its " << parts << " tensors";
  }
  if (auto cols = getCols())
    if (type.getRank() < 2 || type.getShape().back() != (*cols)[1])
      return emitOpError() << "weight '" << getName() << "' of " << type << " cannot hold "
                           << (*cols)[1] << " columns";
  Type elem = type.getElementType();
  // fp8 from the checkpoint carries its own block scales ('scale').
  bool quantized = elem.isInteger(8) || elem.isInteger(4) ||
                   (elem.isFloat8E4M3FN() && !getScale());
  if (quantized != getGroup().has_value())
    return emitOpError() << "weight '" << getName()
                         << "' needs a 'group' exactly when it is i8, i4 or (without a checkpoint "
                            "scale) f8E4M3FN, got "
                         << type;
  if (quantized && (type.getRank() < 2 || *getGroup() < 1 ||
                    uint64_t(*getGroup()) > uint64_t(type.getShape().back()) ||
                    (elem.isInteger(4) && (type.getShape().back() % 2 || *getGroup() % 2))))
    return emitOpError() << "weight '" << getName() << "' of " << type << " cannot have group "
                         << *getGroup();
  if (getInt8Activations() &&
      (!(elem.isInteger(8) || elem.isInteger(4)) || type.getRank() < 2 ||
       (elem.isInteger(8) && *getGroup() != type.getShape().back()) ||
       (elem.isInteger(4) && *getGroup() % 128 && *getGroup() != type.getShape().back())))
    return emitOpError() << "weight '" << getName() << "' of " << type
                         << " has int8_activations, which needs i8 with one scale per row "
                            "(w8a8: group = its row length) or i4 with groups starting at "
                            "multiples of 128 (w4a8: group a multiple of 128 or the row length)";
  if (getPanels() && (!(elem.isF32() || elem.isBF16() || elem.isF16()) || type.getRank() < 2 ||
                      type.getDimSize(type.getRank() - 2) % ::moe::rt::kPanelRows != 0))
    return emitOpError() << "weight '" << getName() << "' of " << type
                         << " is in panels, which needs an f32, bf16 or f16 matrix whose rows "
                            "are a multiple of "
                         << ::moe::rt::kPanelRows;
  return success();
}

LogicalResult InputOp::verify() {
  if (getIndex() > 1)
    return emitOpError() << "index must be 0 (tokens) or 1 (positions), got "
                         << static_cast<int64_t>(getIndex());
  return success();
}

bool mlir::plan::isTokenLed(Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  return type && type.getRank() >= 1 && type.isDynamicDim(0);
}

LogicalResult RowsOp::verify() {
  if (!getBase().getDefiningOp<AllocOp>() && !getBase().getDefiningOp<InputOp>())
    return emitOpError() << "views rows of a plan.alloc or a plan.input";
  if (!isTokenLed(getBase()))
    return emitOpError() << "views the token rows of a buffer whose dimension 0 is dynamic, got "
                         << getBase().getType();
  const int64_t part = int64_t(getPart()), parts = int64_t(getParts());
  if (parts < 2 || part < 0 || part >= parts)
    return emitOpError() << "part " << part << " of " << parts
                         << ": expected 2 or more parts and a part in [0, parts)";
  return success();
}

namespace {
/// Arena memory an op may write: a buffer, or rows of one.
bool isArenaBuffer(Value v) {
  if (auto rows = v.getDefiningOp<RowsOp>())
    v = rows.getBase();
  return bool(v.getDefiningOp<AllocOp>());
}

/// Every token-led operand (dimension 0 dynamic) of an op that takes a
/// row view is a view of the same part.
LogicalResult checkParts(Operation *op) {
  RowsOp first;
  for (Value v : op->getOperands())
    if (auto rows = v.getDefiningOp<RowsOp>(); rows && !first)
      first = rows;
  if (!first)
    return success();
  for (Value v : op->getOperands()) {
    if (!isTokenLed(v))
      continue;
    auto rows = v.getDefiningOp<RowsOp>();
    if (!rows || rows.getPart() != first.getPart() || rows.getParts() != first.getParts())
      return op->emitOpError() << "takes rows of part " << first.getPart() << " of "
                               << first.getParts()
                               << "; every operand led by the step's tokens must be a "
                                  "plan.rows view of that part";
  }
  return success();
}
} // namespace

LogicalResult AllocOp::verify() {
  // Tokens lead, or follow the rank dimension of a gathered or exchanged
  // activation ([ranks, T, ...]).
  auto type = cast<MemRefType>(getType());
  for (int64_t i = 1; i < type.getRank(); ++i)
    if (type.isDynamicDim(i) && (i > 1 || type.isDynamicDim(0)))
      return emitOpError() << "only the token dimension (0, or 1 after a rank dimension) may "
                              "be dynamic, got "
                           << type;
  if (getOffset() && static_cast<int64_t>(*getOffset()) < 0)
    return emitOpError() << "offset must be >= 0, got "
                         << static_cast<int64_t>(*getOffset());
  return success();
}

LogicalResult KvCacheOp::verify() {
  if (static_cast<int64_t>(getKWidth()) < 1 ||
      static_cast<int64_t>(getVWidth()) < 1)
    return emitOpError() << "k_width and v_width must be positive, got "
                         << static_cast<int64_t>(getKWidth()) << " and "
                         << static_cast<int64_t>(getVWidth());
  return success();
}

namespace {
/// Whether `params` is the parameter attribute Kernels.def names.
bool isParamsOf(KernelParams kind, Attribute params) {
  switch (kind) {
  case KernelParams::NONE: return !params;
  case KernelParams::RmsNormParams: return isa_and_nonnull<RmsNormParamsAttr>(params);
  case KernelParams::RouterParams: return isa_and_nonnull<RouterParamsAttr>(params);
  case KernelParams::AttentionParams: return isa_and_nonnull<AttentionParamsAttr>(params);
  case KernelParams::MlaParams: return isa_and_nonnull<MlaParamsAttr>(params);
  case KernelParams::ExpertsParams: return isa_and_nonnull<ExpertsParamsAttr>(params);
  case KernelParams::DispatchParams: return isa_and_nonnull<DispatchParamsAttr>(params);
  }
  return false;
}

const char *paramsMnemonic(KernelParams kind) {
  switch (kind) {
  case KernelParams::NONE: return "none";
  case KernelParams::RmsNormParams: return "#plan.rms_norm";
  case KernelParams::RouterParams: return "#plan.router";
  case KernelParams::AttentionParams: return "#plan.attention";
  case KernelParams::MlaParams: return "#plan.mla";
  case KernelParams::ExpertsParams: return "#plan.experts";
  case KernelParams::DispatchParams: return "#plan.dispatch";
  }
  return "?";
}
} // namespace

LogicalResult LaunchOp::verify() {
  const KernelInfo &k = info();
  unsigned ins = getIns().size(), outs = getOuts().size();
  if (ins < k.minIns || ins > k.maxIns || outs != k.outs)
    return emitOpError() << "kernel '" << k.name << "' takes " << k.minIns << "-" << k.maxIns
                         << " inputs and " << k.outs << " outputs, got " << ins << " and "
                         << outs;
  if (k.kv != static_cast<bool>(getKv()))
    return emitOpError() << "kernel '" << k.name << "' " << (k.kv ? "needs" : "takes no")
                         << " KV-cache layer";
  if (!isParamsOf(k.params, getParamsAttr())) {
    if (k.params == KernelParams::NONE)
      return emitOpError() << "kernel '" << k.name << "' takes no parameters, got "
                           << getParamsAttr();
    InFlightDiagnostic d = emitOpError() << "kernel '" << k.name << "' needs parameters "
                                         << paramsMnemonic(k.params) << "<...>, got ";
    if (getParamsAttr())
      d << getParamsAttr();
    else
      d << "none";
    return d;
  }
  if (auto p = dyn_cast_or_null<ExpertsParamsAttr>(getParamsAttr()); p && failed(checkShare(p)))
    return failure();
  for (Value out : getOuts())
    if (!isArenaBuffer(out))
      return emitOpError() << "writes a buffer that is not a plan.alloc";
  if (failed(checkParts(*this)))
    return failure();
  return checkStream(*this, getStream());
}

LogicalResult LaunchOp::checkShare(ExpertsParamsAttr p) {
  const bool sharded = p.getStacked() != 0;
  if (!sharded) {
    if (p.getHeld() || p.getReplicas() || p.getReplica())
      return emitOpError() << "names held experts or replicas without stacked experts";
    return success();
  }
  const size_t stacks = size_t(p.getNumExperts() + p.getNumShared());
  auto sized = [&](DenseI64ArrayAttr a) { return !a || a.size() == stacks; };
  if (getKernel().getKernel() != Kernel::ExpertRows || p.getStacked() < 0 || !p.getHeld() ||
      !sized(p.getHeld()) || !sized(p.getReplicas()) || !sized(p.getReplica()) ||
      bool(p.getReplicas()) != bool(p.getReplica()))
    return emitOpError() << "a sharded expert launch is an expert_rows with held = one stacked "
                            "expert per stack (and replicas and replica, if any, as many)";
  llvm::SmallDenseSet<int64_t> seen;
  for (size_t i = 0; i < stacks; ++i) {
    const int64_t e = p.getHeld()[i];
    const int64_t n = p.getReplicas() ? p.getReplicas()[i] : 1;
    const int64_t r = p.getReplica() ? p.getReplica()[i] : 0;
    if (e < 0 || e >= p.getStacked() || !seen.insert(e).second || n < 1 || r < 0 || r >= n)
      return emitOpError() << "stack " << i << " holds expert " << e << " as replica " << r
                           << " of " << n << "; expected a distinct expert in [0, "
                           << p.getStacked() << ") and a replica in [0, replicas)";
  }
  return success();
}

LogicalResult GroupAttr::verify(function_ref<InFlightDiagnostic()> emitError, GroupKind,
                                ArrayRef<int64_t> ranks) {
  // (An empty list does not parse.)
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] < 0 || (i && ranks[i] <= ranks[i - 1]))
      return emitError() << "a process group's ranks are ascending, distinct and not negative; "
                            "got "
                         << ranks[i] << " at position " << i;
  return success();
}

LogicalResult CollectiveOp::verify() {
  if (GroupAttr group = getGroupAttr()) {
    // A rank program's collective spans a group that includes its rank.
    IntegerAttr rank;
    for (Operation *p = (*this)->getParentOp(); p && !rank; p = p->getParentOp())
      rank = p->getAttrOfType<IntegerAttr>("plan.rank");
    if (rank && !llvm::is_contained(group.getRanks(), rank.getInt()))
      return emitOpError() << "runs in rank " << rank.getInt()
                           << "'s program, but its group " << group << " does not include it";
  }
  const bool exchange = getKind() == CollectiveKind::all_to_all_v;
  // all_to_all_v sends rows with their slots (2 and 2) or returns them (1 and 1).
  const unsigned want = exchange && getIns().size() == 2 ? 2 : 1;
  if (getIns().size() != want || getOuts().size() != want)
    return emitOpError() << "'" << stringifyCollectiveKind(getKind()) << "' takes "
                         << (exchange ? "2 inputs and 2 outputs (rows and slots out) or 1 and 1 "
                                        "(rows back)"
                                      : "1 input(s) and 1 output(s)")
                         << ", got " << getIns().size() << " and " << getOuts().size();
  auto in = cast<MemRefType>(getIns()[0].getType());
  auto out = cast<MemRefType>(getOuts()[0].getType());
  if (!(in.getElementType().isF32() || in.getElementType().isBF16()) ||
      in.getElementType() != out.getElementType())
    return emitOpError() << "moves f32 or bf16 data, the same in and out; got " << in
                         << " and " << out;
  if (getKind() == CollectiveKind::all_reduce) {
    if (in.getShape() != out.getShape())
      return emitOpError() << "'all_reduce' keeps the shape; got " << in << " and " << out;
  } else if (getKind() == CollectiveKind::all_gather) {
    if (out.getRank() != in.getRank() + 1 || out.isDynamicDim(0) ||
        out.getShape().drop_front() != in.getShape())
      return emitOpError() << "'all_gather' gives [ranks] + the input's shape; got " << in
                           << " and " << out;
  } else {
    // Rows [T, P, H] go out as [T, ranks x P, H] (received, packed from
    // the front) and come back the other way.
    MemRefType local = want == 2 ? in : out, received = want == 2 ? out : in;
    if (local.getRank() != 3 || !local.isDynamicDim(0) || received.getRank() != 3 ||
        !received.isDynamicDim(0) || local.isDynamicDim(1) || received.isDynamicDim(1) ||
        received.getDimSize(1) % local.getDimSize(1) || received.getDimSize(2) != local.getDimSize(2))
      return emitOpError() << "'all_to_all_v' " << (want == 2 ? "sends" : "returns")
                           << " rows [T, P, H] as [T, ranks x P, H]; got " << in << " and "
                           << out;
    if (want == 2) {
      auto slots = cast<MemRefType>(getIns()[1].getType());
      auto got = cast<MemRefType>(getOuts()[1].getType());
      if (!slots.getElementType().isInteger(32) || !got.getElementType().isInteger(32) ||
          slots.getShape() != in.getShape().drop_back() ||
          got.getShape() != out.getShape().drop_back())
        return emitOpError() << "'all_to_all_v' slots are i32 [T, P] out and [T, ranks x P] "
                                "in; got "
                             << slots << " and " << got;
    }
  }
  for (Value o : getOuts())
    if (!isArenaBuffer(o))
      return emitOpError() << "writes a buffer that is not a plan.alloc";
  if (failed(checkParts(*this)))
    return failure();
  return checkStream(*this, getStream());
}

LogicalResult RecordOp::verify() { return checkStream(*this, getStream()); }

LogicalResult WaitOp::verify() {
  if (failed(checkStream(*this, getStream())))
    return failure();
  auto record = getEvent().getDefiningOp<RecordOp>();
  if (!record)
    return emitOpError() << "waits for an event that no plan.record defines";
  if (record.getStream() == getStream())
    return emitOpError() << "waits on stream " << getStream()
                         << " for an event of the same stream (program order already orders it)";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.cpp.inc"
