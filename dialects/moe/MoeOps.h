//===- MoeOps.h - ops of the moe dialect ------------------------*- C++ -*-===//
#ifndef MOE_DIALECTS_MOE_MOEOPS_H
#define MOE_DIALECTS_MOE_MOEOPS_H

#include "dialects/moe/MoeDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/moe/MoeOps.h.inc"

#endif
