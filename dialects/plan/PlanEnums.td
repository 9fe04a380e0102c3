//===- PlanEnums.td - enums of the plan dialect ---------------------------===//
#ifndef PLAN_ENUMS_TD
#define PLAN_ENUMS_TD

include "mlir/IR/EnumAttr.td"

def Plan_KvKindGqa : I32EnumAttrCase<"gqa", 0>;
def Plan_KvKindMla : I32EnumAttrCase<"mla", 1>;
def Plan_KvKindAttr : I32EnumAttr<"KvKind", "what one KV-cache layer holds",
    [Plan_KvKindGqa, Plan_KvKindMla]> {
  let cppNamespace = "::mlir::plan";
}

#endif
