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

// The values are plan.fbs's CollectiveOp (the plan writer checks them).
def Plan_AllReduce : I32EnumAttrCase<"all_reduce", 1>;
def Plan_AllGather : I32EnumAttrCase<"all_gather", 2>;
def Plan_AllToAllV : I32EnumAttrCase<"all_to_all_v", 3>;
def Plan_CollectiveKindAttr : I32EnumAttr<"CollectiveKind", "a collective among the ranks",
    [Plan_AllReduce, Plan_AllGather, Plan_AllToAllV]> {
  let cppNamespace = "::mlir::plan";
}

// The values are plan.fbs's GroupKind (the plan writer checks them).
def Plan_GroupTensor : I32EnumAttrCase<"tensor", 0>;
def Plan_GroupData : I32EnumAttrCase<"data", 1>;
def Plan_GroupExpert : I32EnumAttrCase<"expert", 2>;
def Plan_GroupKindAttr : I32EnumAttr<"GroupKind", "why a process group's ranks meet",
    [Plan_GroupTensor, Plan_GroupData, Plan_GroupExpert]> {
  let cppNamespace = "::mlir::plan";
}

#endif
