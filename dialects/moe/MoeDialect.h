//===- MoeDialect.h - the moe dialect ---------------------------*- C++ -*-===//
#ifndef MOE_DIALECTS_MOE_MOEDIALECT_H
#define MOE_DIALECTS_MOE_MOEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/moe/MoeDialect.h.inc"
#include "dialects/moe/MoeEnums.h.inc"

#endif
