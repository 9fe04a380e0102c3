//===- PlanAttrs.td - kernels and their typed parameters ------------------===//
//
// `#plan.kernel<name>` is a kernel of Kernels.def; each kernel that has
// parameters takes one attribute of the matching kind below, which mirrors
// its parameter table in plan.fbs field by field. A missing, misspelled or
// mistyped field is a parse error.
//
//===----------------------------------------------------------------------===//
#ifndef PLAN_ATTRS_TD
#define PLAN_ATTRS_TD

include "dialects/plan/PlanDialect.td"
include "dialects/plan/PlanEnums.td"
include "dialects/moe/MoeEnums.td"
include "mlir/IR/AttrTypeBase.td"

class Plan_Attr<string name, string attrMnemonic> : AttrDef<Plan_Dialect, name> {
  let mnemonic = attrMnemonic;
}

class Plan_ParamsAttr<string name, string attrMnemonic> : Plan_Attr<name, attrMnemonic> {
  let assemblyFormat = "`<` struct(params) `>`";
}

def Plan_KernelAttr : Plan_Attr<"Kernel", "kernel"> {
  let summary = "a kernel of abi/include/moe/abi/Kernels.def";
  let parameters = (ins "::mlir::plan::Kernel":$kernel);
  let hasCustomAssemblyFormat = 1;
}

def Plan_GroupAttr : Plan_Attr<"Group", "group"> {
  let summary = "a process group: the ranks one collective spans";
  let description = [{
    `#plan.group<tensor, [2, 3]>`: ranks 2 and 3, ascending and distinct,
    meeting for tensor parallelism (`data`: data-parallel attention;
    `expert`: expert parallelism). A collective without one spans every rank.
  }];
  let parameters = (ins EnumParameter<Plan_GroupKindAttr>:$kind, ArrayRefParameter<"int64_t">:$ranks);
  let assemblyFormat = "`<` $kind `,` `[` $ranks `]` `>`";
  let genVerifyDecl = 1;
}

def Plan_RmsNormParamsAttr : Plan_ParamsAttr<"RmsNormParams", "rms_norm"> {
  let summary = "parameters of rms_norm and add_rms_norm";
  let parameters = (ins "::mlir::FloatAttr":$eps);
}

def Plan_RopeAttr : Plan_ParamsAttr<"Rope", "rope"> {
  let summary = "RoPE resolved at compile time (see plan.fbs's Rope)";
  let parameters = (ins "::mlir::DenseF32ArrayAttr":$inv_freq,
                        "::mlir::FloatAttr":$attention_factor,
                        "::mlir::BoolAttr":$interleaved);
}

def Plan_AttentionParamsAttr : Plan_ParamsAttr<"AttentionParams", "attention"> {
  let summary = "parameters of attention (GQA over the paged KV cache)";
  let parameters = (ins "int64_t":$layer, "int64_t":$num_heads, "int64_t":$num_kv_heads,
                        "int64_t":$head_dim, "::mlir::FloatAttr":$scale,
                        "::mlir::plan::RopeAttr":$rope, "int64_t":$sliding_window,
                        "::mlir::FloatAttr":$qk_norm_eps);
}

def Plan_MlaParamsAttr : Plan_ParamsAttr<"MlaParams", "mla"> {
  let summary = "parameters of mla_attention";
  let parameters = (ins "int64_t":$layer, "int64_t":$num_heads, "int64_t":$kv_lora_rank,
                        "int64_t":$qk_nope_head_dim, "int64_t":$qk_rope_head_dim,
                        "int64_t":$v_head_dim, "::mlir::FloatAttr":$scale,
                        "::mlir::plan::RopeAttr":$rope, "::mlir::FloatAttr":$norm_eps);
}

def Plan_RouterParamsAttr : Plan_ParamsAttr<"RouterParams", "router"> {
  let summary = "parameters of router";
  let parameters = (ins "int64_t":$num_experts, "int64_t":$top_k,
                        EnumParameter<Moe_ScoringAttr>:$scoring,
                        EnumParameter<Moe_TopkMethodAttr>:$method,
                        "::mlir::BoolAttr":$norm_topk_prob, "int64_t":$n_group,
                        "int64_t":$topk_group, "::mlir::FloatAttr":$routed_scaling_factor,
                        "int64_t":$layer,
                        DefaultValuedParameter<"::mlir::moe::RoutingPolicy",
                                               "::mlir::moe::RoutingPolicy::token_choice">:$policy,
                        OptionalParameter<"::mlir::FloatAttr">:$capacity_factor);
}

def Plan_DispatchParamsAttr : Plan_ParamsAttr<"DispatchParams", "dispatch"> {
  let summary = "parameters of dispatch";
  let parameters = (ins "int64_t":$num_experts, "int64_t":$num_shared);
}

def Plan_ExpertsParamsAttr : Plan_ParamsAttr<"ExpertsParams", "experts"> {
  let summary = "parameters of experts";
  let description = [{
    expert_rows under expert parallelism (`stacked` > 0): the launch's
    stacks hold num_experts + num_shared of the layer's `stacked` experts,
    stack i holding expert `held[i]`, which has `replicas[i]` replicas of
    which this is number `replica[i]` (absent: 1 and 0). Of expert e's
    rows, in row order, the n-th is this launch's when n mod replicas
    equals replica; the others' rows are left to other ranks (zeros).
  }];
  let parameters = (ins "int64_t":$num_experts, "int64_t":$intermediate,
                        "::mlir::BoolAttr":$fused_gate_up, "int64_t":$num_shared,
                        "::mlir::BoolAttr":$grouped,
                        DefaultValuedParameter<"int64_t", "0">:$stacked,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$held,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$replicas,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$replica,
                        DefaultValuedParameter<"int64_t", "-1">:$layer);
}

#endif
