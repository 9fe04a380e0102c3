//===- Passes.td - transformation passes ----------------------------------===//
#ifndef MOE_TRANSFORMS_PASSES_TD
#define MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseExpertsPass : Pass<"moe-fuse-experts", "mlir::ModuleOp"> {
  let summary = "Fuse expert projections and residual norms for the runtime";
  let description = [{
    On the `moe` dialect, before `moe-to-plan`:

    - Routed experts with separate gate and up stacks (`weights(%gate, %up,
      %down)`) get one `gate_up` stack: a `moe.weight` whose `concat` puts
      each expert's up rows after its gate rows, packed side by side by the
      plan writer. The experts kernel then runs one grouped GEMM of 2I rows
      per expert instead of two, reading each token row once.
    - `moe.add` feeding a `moe.rms_norm` becomes `moe.add_rms_norm` (both
      results: the residual sum and its norm), one pass over the rows.

    Router scoring, top-k and normalisation are already one `moe.router` op
    from the importer. The experts op itself is the permute + grouped GEMM +
    SwiGLU + grouped GEMM + weighted combine: the CPU kernel runs those
    stages on one scratch buffer. Outputs are unchanged (bit for bit on the
    CPU backend).

    Before:
    ```mlir
    %s = moe.add %a, %b : ...
    %n = moe.rms_norm %s, %w eps 1.0e-6 : ...
    %y = moe.experts %n routed(%rw, %ri) weights(%gate, %up, %down) : ...
    ```
    After:
    ```mlir
    %s, %n = moe.add_rms_norm %a, %b, %w eps 1.0e-6 : ...
    %gu = moe.weight "...experts.{e}.gate_proj.weight"
            concat ["...experts.{e}.up_proj.weight"] : tensor<E x 2I x H x bf16>
    %y = moe.experts %n routed(%rw, %ri) weights(%gu, %down) : ...
    ```
  }];
}

def PlanMemoryPass : Pass<"moe-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign arena offsets to plan buffers from their lifetimes";
  let description = [{
    Each `plan.alloc` lives from the first launch that touches it to the last
    (the program's output to the end). Buffers are placed first-fit, in order
    of their first use, into a single arena, 64-byte aligned, sized for
    `max-batch-tokens` rows; buffers whose lifetimes do not overlap share
    bytes. The module records `plan.max_batch_tokens` and `plan.arena_bytes`
    (the peak activation memory).

    Before:
    ```mlir
    %a = plan.alloc : memref<?x32xf32>
    ```
    After (`max-batch-tokens=4`):
    ```mlir
    %a = plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
    ```
  }];
  let options = [
    Option<"maxBatchTokens", "max-batch-tokens", "int64_t", "256",
           "most tokens one run processes (sizes the arena)">
  ];
}

#endif
