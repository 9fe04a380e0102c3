//===- PlanShapes.h - every kernel's view of its tensors, checked -*- C++ -*-===//
#ifndef MOE_RUNTIME_SRC_PLANSHAPES_H
#define MOE_RUNTIME_SRC_PLANSHAPES_H

#include "moe/abi/PlanFormat.h"
#include "moe/abi/Status.h"

namespace moe::rt {

/// Checks that each instruction of `program`'s tensors have the shapes, dtypes and
/// storage its kernel assumes, and agree with its parameters, the KV-cache
/// layers and the model config: with LoadedPlan::check's structural checks,
/// a plan that passes can be run without any kernel reading or writing
/// outside its tensors. Run after the indices have been checked.
Status checkShapes(const plan::Plan &plan, const plan::Program &program);

} // namespace moe::rt

#endif
