//===- PlanDialect.h - the plan dialect -------------------------*- C++ -*-===//
#ifndef MOE_DIALECTS_PLAN_PLANDIALECT_H
#define MOE_DIALECTS_PLAN_PLANDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/plan/PlanDialect.h.inc"

#endif
