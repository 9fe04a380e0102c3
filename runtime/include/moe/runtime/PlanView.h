//===- PlanView.h - plan fields as the HAL names them -----------*- C++ -*-===//
//
// The few translations from the plan format's types to the HAL's that the
// loader's checks, the session and the tools share.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_PLANVIEW_H
#define MOE_RUNTIME_PLANVIEW_H

#include "moe/abi/Kernel.h"
#include "moe/abi/KernelCall.h"
#include "moe/abi/Schedule.h"
#include "abi/schema/plan_generated.h"

#include <algorithm>
#include <string>

namespace moe::rt {

/// A plan dtype as the HAL names it (the same numbers; checked in Plan.cpp).
inline DType dtypeOf(plan::DType dtype) { return DType(dtype); }
/// Element size of a plan dtype in bytes, and its name (KernelCall.h).
inline size_t dtypeSize(plan::DType dtype) { return dtypeSize(dtypeOf(dtype)); }
inline const char *dtypeName(plan::DType dtype) { return dtypeName(dtypeOf(dtype)); }

/// The kernel an instruction launches (op codes are Kernels.def's rows).
inline Kernel kernelOf(const plan::Instruction &inst) { return Kernel(inst.op()); }

/// A collective's name as the plan dialect spells it ("all_reduce", ...).
inline const char *collectiveName(plan::CollectiveOp op) {
  switch (op) {
  case plan::CollectiveOp::AllReduce: return "all_reduce";
  case plan::CollectiveOp::AllGather: return "all_gather";
  case plan::CollectiveOp::AllToAllV: return "all_to_all_v";
  default: return "none";
  }
}

/// A process group as the plan dialect spells it: "tensor group [2, 3]"
/// (the loader checked the kind and the ranks).
inline std::string groupName(const plan::Group &g) {
  std::string ranks;
  for (int32_t r : *g.ranks())
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const char *kind = g.kind() == plan::GroupKind::Tensor ? "tensor"
                     : g.kind() == plan::GroupKind::Data ? "data"
                                                         : "expert";
  return std::string(kind) + " group [" + ranks + "]";
}

/// How many ranks collective `inst` spans: its group's, else every rank's
/// (the loader checked the group index).
inline int64_t ranksOf(const plan::Plan &p, const plan::Instruction &inst) {
  return inst.group() >= 0 ? int64_t(p.groups()->Get(uint32_t(inst.group()))->ranks()->size())
                           : int64_t(p.programs()->size());
}

/// What an instruction runs: its collective's or its kernel's name ("?"
/// for an op code Kernels.def lacks).
inline const char *instructionName(const plan::Instruction &inst) {
  if (inst.collective() != plan::CollectiveOp::None)
    return collectiveName(inst.collective());
  const KernelInfo *k = kernelInfo(kernelOf(inst));
  return k ? k->name : "?";
}

/// The KV-cache layer `inst` reads and writes (its attention or MLA
/// parameters name it), -1 for none.
inline int kvLayerOf(const plan::Instruction &inst) {
  if (auto *a = inst.params_as_AttentionParams())
    return a->layer();
  if (auto *m = inst.params_as_MlaParams())
    return m->layer();
  return -1;
}

/// Whether two plan vectors hold the same elements (or both are absent).
template <typename T>
bool sameElements(const flatbuffers::Vector<T> *x, const flatbuffers::Vector<T> *y) {
  return (!x && !y) || (x && y && std::equal(x->begin(), x->end(), y->begin(), y->end()));
}

/// The tensor whose rows tensor `id` is (a micro-batch's base; the loader
/// checked it), or `id` itself.
inline uint32_t baseOf(const plan::Plan &p, uint32_t id) {
  const plan::Tensor *t = p.tensors()->Get(id);
  return t->parts() > 1 ? t->base() : id;
}

/// The rows of a step a tensor holds: its micro-batch (format 2.5), or all.
inline RowRange rowsOf(const plan::Tensor &t) { return {t.part(), t.parts()}; }
/// Those an instruction runs on: its operands' micro-batch (the loader
/// checked that they agree), or all.
inline RowRange rowsOf(const plan::Plan &p, const plan::Instruction &inst) {
  for (const auto *ids : {inst.inputs(), inst.outputs()})
    for (uint32_t id : *ids)
      if (p.tensors()->Get(id)->parts() > 1)
        return rowsOf(*p.tensors()->Get(id));
  return {};
}

/// The index of the LM head in a one-rank plan's program when it is the
/// last instruction (a linear writing the program's output, no collective,
/// no micro-batches), which may run on some rows only (Batch::logitRows);
/// -1 otherwise.
inline int64_t narrowableLmHead(const plan::Plan &p) {
  if (p.programs()->size() != 1)
    return -1;
  const plan::Program &program = *p.programs()->Get(0);
  const uint32_t n = program.instructions()->size();
  if (n == 0)
    return -1;
  const plan::Instruction &last = *program.instructions()->Get(n - 1);
  const bool ok = last.op() == plan::OpCode::Linear &&
                  last.collective() == plan::CollectiveOp::None && rowsOf(p, last).parts == 1 &&
                  last.outputs()->size() == 1 &&
                  last.outputs()->Get(0) == program.outputs()->Get(0);
  return ok ? int64_t(n - 1) : -1;
}

} // namespace moe::rt

#endif
