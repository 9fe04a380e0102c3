//===- PlanDialect.td - the plan (execution) dialect ---------------------===//
//
// The `plan` dialect is what the runtime executes, one level above the
// FlatBuffer: memrefs (named weights, caller inputs, arena buffers whose
// offsets the memory planner assigns), KV-cache layers, and kernel launches
// on streams. moe -> plan conversion produces it; compiler/target serialises
// it into plan.fbs.
//
//===----------------------------------------------------------------------===//
#ifndef PLAN_DIALECT_TD
#define PLAN_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::mlir::plan";
  let summary = "buffers, KV cache and kernel launches of a compiled MoE model";
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

def Plan_KvCacheType : TypeDef<Plan_Dialect, "KvCache"> {
  let mnemonic = "kv_cache";
  let summary = "one layer of the per-sequence KV cache";
}

def Plan_EventType : TypeDef<Plan_Dialect, "Event"> {
  let mnemonic = "event";
  let summary = "a point in one stream's work that another stream can wait for";
}

#endif
