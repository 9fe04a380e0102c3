//===- MoeEnums.td - enums of the moe dialect, shared with plan ----------===//
//
// Only enum definitions: the plan dialect includes this file to use the same
// enums in its kernel parameters (one definition, generated once, into
// MoeEnums.h.inc).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_ENUMS_TD
#define MOE_ENUMS_TD

include "mlir/IR/EnumAttr.td"

def Moe_ScoringSoftmax : I32EnumAttrCase<"softmax", 0>;
def Moe_ScoringSigmoid : I32EnumAttrCase<"sigmoid", 1>;
def Moe_ScoringAttr : I32EnumAttr<"Scoring", "router scoring function",
    [Moe_ScoringSoftmax, Moe_ScoringSigmoid]> {
  let cppNamespace = "::mlir::moe";
}

def Moe_TopkGreedy : I32EnumAttrCase<"greedy", 0>;
def Moe_TopkGroupLimited : I32EnumAttrCase<"group_limited_greedy", 1>;
def Moe_TopkNoAuxTc : I32EnumAttrCase<"noaux_tc", 2>;
def Moe_TopkMethodAttr : I32EnumAttr<"TopkMethod", "router expert selection",
    [Moe_TopkGreedy, Moe_TopkGroupLimited, Moe_TopkNoAuxTc]> {
  let cppNamespace = "::mlir::moe";
}

// Which tokens each expert gets in a forward step (moe-set-routing):
// token_choice, each token its top-k (the checkpoints' own routing);
// capacity, token choice with each expert taking at most capacity_factor x
// its even share of the step's picks, an overflowing pick going to the
// token's next-best expert with room; expert_choice, each expert taking its
// capacity_factor x even share of the step's tokens, best scores first.
def Moe_RoutingTokenChoice : I32EnumAttrCase<"token_choice", 0>;
def Moe_RoutingCapacity : I32EnumAttrCase<"capacity", 1>;
def Moe_RoutingExpertChoice : I32EnumAttrCase<"expert_choice", 2>;
def Moe_RoutingPolicyAttr : I32EnumAttr<"RoutingPolicy", "how a step's picks are assigned",
    [Moe_RoutingTokenChoice, Moe_RoutingCapacity, Moe_RoutingExpertChoice]> {
  let cppNamespace = "::mlir::moe";
}

// How the plan stores a weight (moe-assign-precision). A weight two
// components share takes the more precise of their choices, in the order
// f32, bf16, int8, w8a8, fp8, int4, w4a8 (AssignPrecision.cpp's
// precisionRank: the values below are not that order), except that an int8
// (int4) embedding lookup goes with a w8a8 (w4a8) LM head as w8a8 (w4a8).
// w8a8 stores the weight exactly as int8 with one scale per row, w4a8 as
// int4 with groups starting at multiples of 128 elements, and the kernels
// that multiply by them quantize their activations to int8 per token (plan
// Tensor.int8_activations).
def Moe_PrecisionF32 : I32EnumAttrCase<"f32", 0>;
def Moe_PrecisionBf16 : I32EnumAttrCase<"bf16", 1>;
def Moe_PrecisionInt8 : I32EnumAttrCase<"int8", 2>;
def Moe_PrecisionFp8 : I32EnumAttrCase<"fp8", 3>;
def Moe_PrecisionInt4 : I32EnumAttrCase<"int4", 4>;
def Moe_PrecisionW8a8 : I32EnumAttrCase<"w8a8", 5>;
def Moe_PrecisionW4a8 : I32EnumAttrCase<"w4a8", 6>;
def Moe_PrecisionAttr : I32EnumAttr<"Precision", "weight storage precision",
    [Moe_PrecisionF32, Moe_PrecisionBf16, Moe_PrecisionInt8, Moe_PrecisionFp8,
     Moe_PrecisionInt4, Moe_PrecisionW8a8, Moe_PrecisionW4a8]> {
  let cppNamespace = "::mlir::moe";
}

#endif // MOE_ENUMS_TD
