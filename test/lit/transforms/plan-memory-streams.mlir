// With two streams, program order no longer orders buffers: a later buffer
// may take an earlier one's bytes only if every access to the earlier one
// happens before every access to the later through plan.record/plan.wait.
// Offsets below are computed by hand; at 4 rows a ?x32xf32 buffer is 512
// bytes.
// RUN: moe-opt %s -split-input-file --moe-plan-memory=max-batch-tokens=4 | FileCheck %s

// Steps: 1 embedding -> a (s0); s1 waits for it; 2 a -> b, 3 b -> c (s1);
// 4 embedding -> d (s0, concurrent with 2 and 3); s0 waits for s1; 5 c + d
// -> f (s0); output f.
// a [1,2] at 0. b [2,3] at 512 (a live). c [3,5]: a is dead in program
// order and both its uses (1 on s0, 2 on s1) are ordered before c's (3 on
// s1; 5 on s0 after the wait): c reuses 0. d [4,5]: a and b are dead in
// program order, but stream 1 may still be reading a and writing b while
// step 4 runs (no wait before it): d may share with neither, nor with c
// (live): 1024. f [5,end]: a's and b's uses are ordered before 5 (the
// wait), c and d are live: f takes 512. Peak 1536.
// On one stream the same program gives d 512 (b dead), f 1024: that is
// the SINGLE function below.
// CHECK: module attributes {plan.max_batch_tokens = 4 : i64}
// CHECK-LABEL: func.func @two_streams() attributes {plan.arena_bytes = 1536 : i64}
// CHECK: %[[A:.*]] = plan.alloc {offset = 0 : i64, size = 512 : i64}
// CHECK-NEXT: %[[B:.*]] = plan.alloc {offset = 512 : i64, size = 512 : i64}
// CHECK-NEXT: %[[C:.*]] = plan.alloc {offset = 0 : i64, size = 512 : i64}
// CHECK-NEXT: %[[D:.*]] = plan.alloc {offset = 1024 : i64, size = 512 : i64}
// CHECK-NEXT: %[[F:.*]] = plan.alloc {offset = 512 : i64, size = 512 : i64}
// CHECK-LABEL: func.func @single()
// CHECK: plan.alloc {offset = 0 : i64, size = 512 : i64}
// CHECK-NEXT: plan.alloc {offset = 512 : i64, size = 512 : i64}
// CHECK-NEXT: plan.alloc {offset = 0 : i64, size = 512 : i64}
// CHECK-NEXT: plan.alloc {offset = 512 : i64, size = 512 : i64}
// CHECK-NEXT: plan.alloc {offset = 1024 : i64, size = 512 : i64}
func.func @two_streams() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %c = plan.alloc : memref<?x32xf32>
  %d = plan.alloc : memref<?x32xf32>
  %f = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  %e0 = plan.record stream 0 : !plan.event
  plan.wait %e0 stream 1
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>) {stream = 1 : i64}
  plan.launch linear ins(%b, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%c : memref<?x32xf32>) {stream = 1 : i64}
  %e1 = plan.record stream 1 : !plan.event
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%d : memref<?x32xf32>)
  plan.wait %e1 stream 0
  plan.launch add ins(%c, %d : memref<?x32xf32>, memref<?x32xf32>) outs(%f : memref<?x32xf32>)
  plan.output %f : memref<?x32xf32>
  return
}
func.func @single() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %c = plan.alloc : memref<?x32xf32>
  %d = plan.alloc : memref<?x32xf32>
  %f = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>)
  plan.launch linear ins(%b, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%c : memref<?x32xf32>)
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%d : memref<?x32xf32>)
  plan.launch add ins(%c, %d : memref<?x32xf32>, memref<?x32xf32>) outs(%f : memref<?x32xf32>)
  plan.output %f : memref<?x32xf32>
  return
}

// -----

// A stream nobody waits for keeps its buffers busy to the end: nothing
// orders its launches before any later step, so g cannot take their bytes
// although a and b are dead in program order.
// a [1,2] at 0; b [2,2] (s1) at 512; g [3,end] (s0): a's uses (1 on s0, 2
// on s1 with no wait by s0) are not ordered before 3, nor are b's: g at
// 1024. Peak 1536.
// CHECK: module attributes {plan.max_batch_tokens = 4 : i64}
// CHECK-LABEL: func.func @never_joined() attributes {plan.arena_bytes = 1536 : i64}
// CHECK: plan.alloc {offset = 0 : i64, size = 512 : i64}
// CHECK-NEXT: plan.alloc {offset = 512 : i64, size = 512 : i64}
// CHECK-NEXT: plan.alloc {offset = 1024 : i64, size = 512 : i64}
func.func @never_joined() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %g = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  %e0 = plan.record stream 0 : !plan.event
  plan.wait %e0 stream 1
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>) {stream = 1 : i64}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%g : memref<?x32xf32>)
  plan.output %g : memref<?x32xf32>
  return
}
