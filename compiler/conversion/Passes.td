//===- Passes.td - conversion passes --------------------------------------===//
#ifndef MOE_CONVERSION_PASSES_TD
#define MOE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoeToPlanPass : Pass<"moe-to-plan", "mlir::ModuleOp"> {
  let summary = "Lower the moe model graph to plan buffers and kernel launches";
  let description = [{
    Replaces `func.func @forward` (moe ops on tensors) with `func.func @main`
    (plan ops on memrefs): weights become `plan.weight`, the function's
    arguments `plan.input`, every result a `plan.alloc` written by one
    `plan.launch`. Dense and shared SwiGLU MLPs become linear + silu_mul +
    linear; attention layers get a `plan.kv_cache` each; RoPE scaling is
    resolved into inverse frequencies.

    Before:
    ```mlir
    %y = moe.linear %x, %w : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
    ```
    After:
    ```mlir
    %y = plan.alloc : memref<?x16xf32>
    plan.launch "linear" ins(%x, %w : memref<?x32xf32>, memref<16x32xbf16>)
                         outs(%y : memref<?x16xf32>)
    ```
  }];
  let dependentDialects = ["mlir::plan::PlanDialect"];
  let options = [
    Option<"maxContext", "max-context", "int64_t", "4096",
           "KV-cache tokens per sequence (capped by max_position_embeddings)">
  ];
}

#endif
