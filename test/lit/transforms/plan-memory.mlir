// --moe-plan-memory=max-batch-tokens=N gives every used plan.alloc a byte
// offset and size in one arena: size = bytes at N rows for a dynamic dim 0,
// rounded up to 64; a buffer lives from the first op that touches it to the
// last (a program output to the end); first fit in order of first use, so
// buffers whose lifetimes do not overlap share bytes; an unused buffer gets
// nothing. The module records plan.max_batch_tokens, each function its
// plan.arena_bytes. Offsets below are computed by hand.
// RUN: moe-opt %s -split-input-file --moe-plan-memory=max-batch-tokens=4 | FileCheck %s
// RUN: moe-opt %s -split-input-file --moe-plan-memory=max-batch-tokens=5 | FileCheck %s --check-prefix=N5
// RUN: moe-opt %s -split-input-file --moe-plan-memory | FileCheck %s --check-prefix=DEFAULT
// OUTLIVE checks only the last split (an output read after plan.output).
// RUN: moe-opt %s -split-input-file --moe-plan-memory=max-batch-tokens=4 | FileCheck %s --check-prefix=OUTLIVE
// RUN: not moe-opt %s -split-input-file --moe-plan-memory=max-batch-tokens=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not moe-opt %s -split-input-file --moe-plan-memory=max-batch-tokens=-3 2>&1 | FileCheck %s --check-prefix=NEG
// ZERO: error: moe-plan-memory: max-batch-tokens must be positive, got 0{{$}}
// NEG: error: moe-plan-memory: max-batch-tokens must be positive, got -3{{$}}

// A chain a -> b -> c: a dies at the launch that writes c, so c reuses
// offset 0; the unused u gets no offset. At 4 rows a ?x32xf32 buffer is
// 512 bytes (5 rows: 640; the default 256 rows: 32768); peak = 2 buffers.
// CHECK: module attributes {plan.max_batch_tokens = 4 : i64}
// CHECK-LABEL: func.func @main() attributes {plan.arena_bytes = 1024 : i64}
// CHECK: %[[A:.*]] = plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-NEXT: %[[B:.*]] = plan.alloc {offset = 512 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-NEXT: %[[C:.*]] = plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-NEXT: %[[U:.*]] = plan.alloc : memref<?x8xf32>
// CHECK-NEXT: plan.launch embedding {{.*}} outs(%[[A]] :
// CHECK-NEXT: plan.launch linear ins(%[[A]], {{.*}} outs(%[[B]] :
// CHECK-NEXT: plan.launch linear ins(%[[B]], {{.*}} outs(%[[C]] :
// CHECK-NEXT: plan.output %[[C]]
// N5: module attributes {plan.max_batch_tokens = 5 : i64}
// N5: func.func @{{.*}}() attributes {plan.arena_bytes = 1280 : i64}
// N5: plan.alloc {offset = 0 : i64, size = 640 : i64} : memref<?x32xf32>
// N5-NEXT: plan.alloc {offset = 640 : i64, size = 640 : i64} : memref<?x32xf32>
// N5-NEXT: plan.alloc {offset = 0 : i64, size = 640 : i64} : memref<?x32xf32>
// N5-NEXT: plan.alloc : memref<?x8xf32>
// DEFAULT: module attributes {plan.max_batch_tokens = 256 : i64}
// DEFAULT: func.func @{{.*}}() attributes {plan.arena_bytes = 65536 : i64}
// DEFAULT: plan.alloc {offset = 0 : i64, size = 32768 : i64} : memref<?x32xf32>
// DEFAULT-NEXT: plan.alloc {offset = 32768 : i64, size = 32768 : i64} : memref<?x32xf32>
// DEFAULT-NEXT: plan.alloc {offset = 0 : i64, size = 32768 : i64} : memref<?x32xf32>
// DEFAULT-NEXT: plan.alloc : memref<?x8xf32>
func.func @main() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %c = plan.alloc : memref<?x32xf32>
  %u = plan.alloc : memref<?x8xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>)
  plan.launch linear ins(%b, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%c : memref<?x32xf32>)
  plan.output %c : memref<?x32xf32>
  return
}

// -----

// A SwiGLU MLP. Lifetimes (launch 1..4, output 5): h [1,3], g [2,4],
// u [3,4], m [4,5], y [5,end]. 4 rows: h, y 512 bytes; g, u, m 320.
// h 0, g 512, u 832 (h, g live); m reuses 0 (h dead); y: only m is live,
// so first fit puts it right after m, at 320. Peak 832 + 320 = 1152.
// 5 rows: h, y 640; g, u, m 400 -> 448: h 0, g 640, u 1088, m 0, y 448;
// peak 1536.
// CHECK: module attributes {plan.max_batch_tokens = 4 : i64}
// CHECK-LABEL: func.func @main() attributes {plan.arena_bytes = 1152 : i64}
// CHECK: %[[H:.*]] = plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-NEXT: %[[G:.*]] = plan.alloc {offset = 512 : i64, size = 320 : i64} : memref<?x20xf32>
// CHECK-NEXT: %[[U:.*]] = plan.alloc {offset = 832 : i64, size = 320 : i64} : memref<?x20xf32>
// CHECK-NEXT: %[[M:.*]] = plan.alloc {offset = 0 : i64, size = 320 : i64} : memref<?x20xf32>
// CHECK-NEXT: %[[Y:.*]] = plan.alloc {offset = 320 : i64, size = 512 : i64} : memref<?x32xf32>
// N5: module attributes {plan.max_batch_tokens = 5 : i64}
// N5: func.func @{{.*}}() attributes {plan.arena_bytes = 1536 : i64}
// N5: plan.alloc {offset = 0 : i64, size = 640 : i64} : memref<?x32xf32>
// N5-NEXT: plan.alloc {offset = 640 : i64, size = 448 : i64} : memref<?x20xf32>
// N5-NEXT: plan.alloc {offset = 1088 : i64, size = 448 : i64} : memref<?x20xf32>
// N5-NEXT: plan.alloc {offset = 0 : i64, size = 448 : i64} : memref<?x20xf32>
// N5-NEXT: plan.alloc {offset = 448 : i64, size = 640 : i64} : memref<?x32xf32>
func.func @main() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %wg = plan.weight "gate" : memref<20x32xbf16>
  %wu = plan.weight "up" : memref<20x32xbf16>
  %wd = plan.weight "down" : memref<32x20xbf16>
  %h = plan.alloc : memref<?x32xf32>
  %g = plan.alloc : memref<?x20xf32>
  %u = plan.alloc : memref<?x20xf32>
  %m = plan.alloc : memref<?x20xf32>
  %y = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%h : memref<?x32xf32>)
  plan.launch linear ins(%h, %wg : memref<?x32xf32>, memref<20x32xbf16>) outs(%g : memref<?x20xf32>)
  plan.launch linear ins(%h, %wu : memref<?x32xf32>, memref<20x32xbf16>) outs(%u : memref<?x20xf32>)
  plan.launch silu_mul ins(%g, %u : memref<?x20xf32>, memref<?x20xf32>) outs(%m : memref<?x20xf32>)
  plan.launch linear ins(%m, %wd : memref<?x20xf32>, memref<32x20xbf16>) outs(%y : memref<?x32xf32>)
  plan.output %y : memref<?x32xf32>
  return
}

// -----

// Sizes round up to 64 bytes, whatever the element type; static shapes do
// not scale with N; the two outputs of one launch are live together.
// 4 rows: x ?x3xf32 48 -> 64, rw ?x2xf32 32 -> 64, ri ?x2xi32 32 -> 64,
// h ?x20xbf16 160 -> 192, s 5x3xf32 60 -> 64, q ?x7xi8 28 -> 64.
// Lifetimes: x [1,3], rw and ri [2,4], h [3,end], s [4,4], q [5,5].
// x 0, rw 64, ri 128, h 192 (x, rw, ri live), s 0 (x dead), q 0 (only h
// live). Peak 192 + 192 = 384.
// 5 rows: x 60 -> 64, rw, ri 40 -> 64, h 200 -> 256, q 35 -> 64: peak 448.
// CHECK: module attributes {plan.max_batch_tokens = 4 : i64}
// CHECK-LABEL: func.func @main() attributes {plan.arena_bytes = 384 : i64}
// CHECK: plan.alloc {offset = 0 : i64, size = 64 : i64} : memref<?x3xf32>
// CHECK-NEXT: plan.alloc {offset = 64 : i64, size = 64 : i64} : memref<?x2xf32>
// CHECK-NEXT: plan.alloc {offset = 128 : i64, size = 64 : i64} : memref<?x2xi32>
// CHECK-NEXT: plan.alloc {offset = 192 : i64, size = 192 : i64} : memref<?x20xbf16>
// CHECK-NEXT: plan.alloc {offset = 0 : i64, size = 64 : i64} : memref<5x3xf32>
// CHECK-NEXT: plan.alloc {offset = 0 : i64, size = 64 : i64} : memref<?x7xi8>
// N5: module attributes {plan.max_batch_tokens = 5 : i64}
// N5: func.func @{{.*}}() attributes {plan.arena_bytes = 448 : i64}
// N5: plan.alloc {offset = 0 : i64, size = 64 : i64} : memref<?x3xf32>
// N5-NEXT: plan.alloc {offset = 64 : i64, size = 64 : i64} : memref<?x2xf32>
// N5-NEXT: plan.alloc {offset = 128 : i64, size = 64 : i64} : memref<?x2xi32>
// N5-NEXT: plan.alloc {offset = 192 : i64, size = 256 : i64} : memref<?x20xbf16>
// N5-NEXT: plan.alloc {offset = 0 : i64, size = 64 : i64} : memref<5x3xf32>
// N5-NEXT: plan.alloc {offset = 0 : i64, size = 64 : i64} : memref<?x7xi8>
func.func @main() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x3xbf16>
  %gw = plan.weight "gate" : memref<4x3xbf16>
  %w = plan.weight "w" : memref<20x3xbf16>
  %x = plan.alloc : memref<?x3xf32>
  %rw = plan.alloc : memref<?x2xf32>
  %ri = plan.alloc : memref<?x2xi32>
  %h = plan.alloc : memref<?x20xbf16>
  %s = plan.alloc : memref<5x3xf32>
  %q = plan.alloc : memref<?x7xi8>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x3xbf16>) outs(%x : memref<?x3xf32>)
  plan.launch router ins(%x, %gw : memref<?x3xf32>, memref<4x3xbf16>) outs(%rw, %ri : memref<?x2xf32>, memref<?x2xi32>) params #plan.router<num_experts = 4, top_k = 2, scoring = softmax, method = greedy, norm_topk_prob = false, n_group = 1, topk_group = 1, routed_scaling_factor = 1.0 : f32, layer = -1>
  plan.launch linear ins(%x, %w : memref<?x3xf32>, memref<20x3xbf16>) outs(%h : memref<?x20xbf16>)
  plan.launch add ins(%rw, %ri : memref<?x2xf32>, memref<?x2xi32>) outs(%s : memref<5x3xf32>)
  plan.launch add ins(%t, %t : memref<?xi32>, memref<?xi32>) outs(%q : memref<?x7xi8>)
  plan.output %h : memref<?x20xbf16>
  return
}

// -----

// An output lives to the end even when plan.output is not the last op:
// o (written at 2, output at 3) keeps [512, 1024) while b and c are placed;
// a [1,4] and b [4,5] are live together, c [5,5] reuses a's offset 0.
// CHECK: module attributes {plan.max_batch_tokens = 4 : i64}
// CHECK-LABEL: func.func @main() attributes {plan.arena_bytes = 1536 : i64}
// CHECK: plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-NEXT: plan.alloc {offset = 512 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-NEXT: plan.alloc {offset = 1024 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-NEXT: plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
func.func @main() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %o = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %c = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%o : memref<?x32xf32>)
  plan.output %o : memref<?x32xf32>
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>)
  plan.launch linear ins(%b, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%c : memref<?x32xf32>)
  return
}

// -----

// Every function (a rank's program) is planned on its own from offset 0,
// with an arena of its own (@other: two 512-byte buffers live together). A
// function without buffers needs none.
// CHECK: module attributes {plan.max_batch_tokens = 4 : i64}
// CHECK-LABEL: func.func @main() attributes {plan.arena_bytes = 128 : i64}
// CHECK: plan.alloc {offset = 0 : i64, size = 128 : i64} : memref<?x8xf32>
// CHECK-LABEL: func.func @other() attributes {plan.arena_bytes = 1024 : i64}
// CHECK: plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-NEXT: plan.alloc {offset = 512 : i64, size = 512 : i64} : memref<?x32xf32>
// CHECK-LABEL: func.func @empty() attributes {plan.arena_bytes = 0 : i64}
// CHECK-NEXT: plan.input 0
// CHECK-NEXT: plan.output
func.func @main() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x8xbf16>
  %a = plan.alloc : memref<?x8xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x8xbf16>) outs(%a : memref<?x8xf32>)
  plan.output %a : memref<?x8xf32>
  return
}
func.func @other() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  plan.launch add ins(%a, %a : memref<?x32xf32>, memref<?x32xf32>) outs(%b : memref<?x32xf32>)
  plan.output %b : memref<?x32xf32>
  return
}
func.func @empty() {
  %t = plan.input 0 : memref<?xi32>
  plan.output %t : memref<?xi32>
  return
}

// -----

// A module without buffers: arena_bytes 0.
// CHECK: module attributes {plan.max_batch_tokens = 4 : i64}
// CHECK: func.func @{{.*}}() attributes {plan.arena_bytes = 0 : i64}
// N5: module attributes {plan.max_batch_tokens = 5 : i64}
// N5: func.func @{{.*}}() attributes {plan.arena_bytes = 0 : i64}
func.func @main() {
  %t = plan.input 0 : memref<?xi32>
  plan.output %t : memref<?xi32>
  return
}

// -----

// An output that a later launch still reads lives to the end all the same:
// a is the program's output, so c may not reuse its bytes once b is
// written. At 4 rows each ?x16xf32 buffer is 256 bytes.
// Expected: a 0, b 256, c 512, peak 768.
// OUTLIVE-LABEL: func.func @output_then_read() attributes {plan.arena_bytes = 768 : i64}
// OUTLIVE: %[[A:.*]] = plan.alloc {offset = 0 : i64, size = 256 : i64} : memref<?x16xf32>
// OUTLIVE-NEXT: %[[B:.*]] = plan.alloc {offset = 256 : i64, size = 256 : i64} : memref<?x16xf32>
// OUTLIVE-NEXT: %[[C:.*]] = plan.alloc {offset = 512 : i64, size = 256 : i64} : memref<?x16xf32>
func.func @output_then_read() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x16xbf16>
  %w = plan.weight "w" : memref<16x16xbf16>
  %a = plan.alloc : memref<?x16xf32>
  %b = plan.alloc : memref<?x16xf32>
  %c = plan.alloc : memref<?x16xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x16xbf16>) outs(%a : memref<?x16xf32>)
  plan.output %a : memref<?x16xf32>
  plan.launch linear ins(%a, %w : memref<?x16xf32>, memref<16x16xbf16>) outs(%b : memref<?x16xf32>)
  plan.launch linear ins(%b, %w : memref<?x16xf32>, memref<16x16xbf16>) outs(%c : memref<?x16xf32>)
  plan.output %c : memref<?x16xf32>
  return
}
