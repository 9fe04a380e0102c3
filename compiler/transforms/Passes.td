//===- Passes.td - transformation passes ----------------------------------===//
#ifndef MOE_TRANSFORMS_PASSES_TD
#define MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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
