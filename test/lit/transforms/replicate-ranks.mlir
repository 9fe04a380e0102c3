// --moe-replicate-ranks=ranks=N: @main becomes one function per rank, each
// a whole copy marked with its rank (the writer gives each its own weight
// file and arena; see test/lit/runtime/ranks.test for runs).
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-replicate-ranks=ranks=2 | FileCheck %s
// RUN: not moe-opt %s -split-input-file --moe-replicate-ranks=ranks=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: moe-replicate-ranks: ranks must be in [1, 4096], got 0

// CHECK-LABEL: func.func @rank0() attributes {plan.rank = 0 : i64}
// CHECK: plan.weight "embed" : memref<96x32xbf16>
// CHECK: plan.launch embedding
// CHECK-LABEL: func.func @rank1() attributes {plan.rank = 1 : i64}
// CHECK: plan.weight "embed" : memref<96x32xbf16>
// CHECK: plan.launch embedding
// CHECK-NOT: func.func @main
func.func @main() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  plan.output %a : memref<?x32xf32>
  return
}

// -----

// expected-error @+1 {{moe-replicate-ranks: needs the one-rank program func.func @main}}
module {
  func.func @rank0() attributes {plan.rank = 0 : i64} {
    return
  }
}
