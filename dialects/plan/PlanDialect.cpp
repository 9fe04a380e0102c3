//===- PlanDialect.cpp - plan dialect, ops and verifiers -----------------===//
#include "dialects/plan/PlanDialect.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::plan;

#include "dialects/plan/PlanDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/plan/PlanTypes.cpp.inc"

void PlanDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/plan/PlanTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/plan/PlanOps.cpp.inc"
      >();
}

const KernelSignature *mlir::plan::lookupKernel(StringRef kernel) {
  static const llvm::StringMap<KernelSignature> kernels = {
      {"embedding", {2, 2, 1, false}},     {"rms_norm", {2, 2, 1, false}},
      {"linear", {2, 3, 1, false}},        {"add", {2, 2, 1, false}},
      {"silu_mul", {2, 2, 1, false}},      {"sigmoid_gate", {3, 3, 1, false}},
      {"attention", {4, 6, 1, true}},      {"mla_attention", {5, 5, 1, true}},
      {"router", {2, 3, 2, false}},        {"experts", {5, 6, 1, false}},
      {"add_rms_norm", {3, 3, 2, false}}};
  auto it = kernels.find(kernel);
  return it == kernels.end() ? nullptr : &it->second;
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
  return success();
}

LogicalResult InputOp::verify() {
  if (getIndex() > 1)
    return emitOpError() << "index must be 0 (tokens) or 1 (positions), got "
                         << static_cast<int64_t>(getIndex());
  return success();
}

LogicalResult AllocOp::verify() {
  auto type = cast<MemRefType>(getType());
  for (int64_t i = 1; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      return emitOpError() << "only dimension 0 (tokens) may be dynamic, got "
                           << type;
  if (getOffset() && static_cast<int64_t>(*getOffset()) < 0)
    return emitOpError() << "offset must be >= 0, got "
                         << static_cast<int64_t>(*getOffset());
  return success();
}

LogicalResult KvCacheOp::verify() {
  if (getKind() != "gqa" && getKind() != "mla")
    return emitOpError() << "kind must be gqa or mla, got '" << getKind() << "'";
  if (static_cast<int64_t>(getKWidth()) < 1 ||
      static_cast<int64_t>(getVWidth()) < 1)
    return emitOpError() << "k_width and v_width must be positive, got "
                         << static_cast<int64_t>(getKWidth()) << " and "
                         << static_cast<int64_t>(getVWidth());
  return success();
}

LogicalResult LaunchOp::verify() {
  const KernelSignature *sig = lookupKernel(getKernel());
  if (!sig)
    return emitOpError() << "unknown kernel '" << getKernel() << "'";
  unsigned ins = getIns().size(), outs = getOuts().size();
  if (ins < sig->minIns || ins > sig->maxIns || outs != sig->outs)
    return emitOpError() << "kernel '" << getKernel() << "' takes "
                         << sig->minIns << "-" << sig->maxIns
                         << " inputs and " << sig->outs << " outputs, got "
                         << ins << " and " << outs;
  if (sig->kv != static_cast<bool>(getKv()))
    return emitOpError() << "kernel '" << getKernel() << "' "
                         << (sig->kv ? "needs" : "takes no")
                         << " KV-cache layer";
  for (Value out : getOuts())
    if (!out.getDefiningOp<AllocOp>())
      return emitOpError() << "writes a buffer that is not a plan.alloc";
  return success();
}

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.cpp.inc"
