// --moe-assign-streams=streams=N puts launch i on stream i mod N (the output
// on stream 0) and, before an op that touches a buffer another stream used
// (one of them writing), records an event on that stream and waits for it,
// unless an earlier event already orders them.
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-assign-streams=streams=3 | FileCheck %s
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-assign-streams=streams=1 | FileCheck %s --check-prefix=ONE
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-assign-streams=streams=3 --moe-verify-schedule > /dev/null
// RUN: not moe-opt %s -split-input-file --moe-assign-streams=streams=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not moe-opt %s -split-input-file --moe-assign-streams=streams=257 2>&1 | FileCheck %s --check-prefix=MANY
// ZERO: error: moe-assign-streams: streams must be in [1, 256], got 0{{$}}
// MANY: error: moe-assign-streams: streams must be in [1, 256], got 257{{$}}

// A fork and a join: a on 0; b and c both read a (on 1 and 2, each after
// the one event recorded right after a); d reads b and c on stream 0 (an
// event recorded right after each). The output on stream 0 needs nothing
// more.
// CHECK-LABEL: func.func @fork_join()
// CHECK: plan.launch embedding {{.*}} outs(%[[A:[0-9]+]] : memref<?x32xf32>){{$}}
// CHECK-NEXT: %[[E0:.*]] = plan.record stream 0 : !plan.event
// CHECK-NEXT: plan.wait %[[E0]] stream 1
// CHECK-NEXT: plan.launch linear ins(%[[A]], {{.*}} {stream = 1 : i64}
// CHECK-NEXT: %[[E1:.*]] = plan.record stream 1 : !plan.event
// CHECK-NEXT: plan.wait %[[E0]] stream 2
// CHECK-NEXT: plan.launch linear ins(%[[A]], {{.*}} {stream = 2 : i64}
// CHECK-NEXT: %[[E2:.*]] = plan.record stream 2 : !plan.event
// CHECK-NEXT: plan.wait %[[E1]] stream 0
// CHECK-NEXT: plan.wait %[[E2]] stream 0
// CHECK-NEXT: plan.launch add {{.*}}>){{$}}
// CHECK-NEXT: plan.output
// ONE-LABEL: func.func @fork_join()
// ONE-NOT: plan.record
// ONE-NOT: stream =
func.func @fork_join() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %c = plan.alloc : memref<?x32xf32>
  %d = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>)
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%c : memref<?x32xf32>)
  plan.launch add ins(%b, %c : memref<?x32xf32>, memref<?x32xf32>) outs(%d : memref<?x32xf32>)
  plan.output %d : memref<?x32xf32>
  return
}

// -----

// Independent launches need no events, and an order already given through
// another stream is not given again. Streams: x 0, y 1, z 2 (independent);
// u on 0 reads x and y (an event of 1); v on 1 reads u (an event of 0);
// w on 2 reads v and x: stream 1 has seen x (and u) of stream 0, so one
// event of stream 1 orders both.
// CHECK-LABEL: func.func @transitive()
// CHECK: plan.launch embedding {{.*}} outs(%[[X:[0-9]+]] : memref<?x8xf32>){{$}}
// CHECK-NEXT: plan.launch embedding {{.*}} outs(%[[Y:[0-9]+]] : memref<?x8xf32>) {stream = 1 : i64}
// CHECK-NEXT: %[[E0:.*]] = plan.record stream 1
// CHECK-NEXT: plan.launch embedding {{.*}} outs(%[[Z:[0-9]+]] : memref<?x8xf32>) {stream = 2 : i64}
// CHECK-NEXT: plan.wait %[[E0]] stream 0
// CHECK-NEXT: plan.launch add ins(%[[X]], %[[Y]] : {{.*}} outs(%[[U:[0-9]+]] : memref<?x8xf32>){{$}}
// CHECK-NEXT: %[[E1:.*]] = plan.record stream 0
// CHECK-NEXT: plan.wait %[[E1]] stream 1
// CHECK-NEXT: plan.launch add ins(%[[U]], %[[U]] : {{.*}} outs(%[[V:[0-9]+]] : memref<?x8xf32>) {stream = 1 : i64}
// CHECK-NEXT: %[[E2:.*]] = plan.record stream 1
// CHECK-NEXT: plan.wait %[[E2]] stream 2
// CHECK-NEXT: plan.launch add ins(%[[V]], %[[X]] : {{.*}} {stream = 2 : i64}
// CHECK-NEXT: %[[E3:.*]] = plan.record stream 2
// CHECK-NEXT: plan.wait %[[E3]] stream 0
func.func @transitive() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x8xbf16>
  %x = plan.alloc : memref<?x8xf32>
  %y = plan.alloc : memref<?x8xf32>
  %z = plan.alloc : memref<?x8xf32>
  %u = plan.alloc : memref<?x8xf32>
  %v = plan.alloc : memref<?x8xf32>
  %w = plan.alloc : memref<?x8xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x8xbf16>) outs(%x : memref<?x8xf32>)
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x8xbf16>) outs(%y : memref<?x8xf32>)
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x8xbf16>) outs(%z : memref<?x8xf32>)
  plan.launch add ins(%x, %y : memref<?x8xf32>, memref<?x8xf32>) outs(%u : memref<?x8xf32>)
  plan.launch add ins(%u, %u : memref<?x8xf32>, memref<?x8xf32>) outs(%v : memref<?x8xf32>)
  plan.launch add ins(%v, %x : memref<?x8xf32>, memref<?x8xf32>) outs(%w : memref<?x8xf32>)
  plan.output %w : memref<?x8xf32>
  return
}

// -----

func.func @already() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x8xbf16>
  %x = plan.alloc : memref<?x8xf32>
  // expected-error @below {{moe-assign-streams: the function already uses streams}}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x8xbf16>) outs(%x : memref<?x8xf32>) {stream = 1 : i64}
  plan.output %x : memref<?x8xf32>
  return
}
