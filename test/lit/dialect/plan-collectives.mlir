// plan.collective: every kind parses, verifies and prints back; each
// verifier error has its case.
// RUN: moe-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @rank0() attributes {plan.rank = 0 : i64}
func.func @rank0() attributes {plan.rank = 0 : i64} {
  %x = plan.alloc : memref<?x32xf32>
  %y = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xbf16>
  %g = plan.alloc : memref<2x?x32xf32>
  %rows = plan.alloc : memref<?x3x32xf32>
  %slots = plan.alloc : memref<?x3xi32>
  %in = plan.alloc : memref<?x6x32xf32>
  %inSlots = plan.alloc : memref<?x6xi32>
  // CHECK: plan.collective all_reduce ins(%{{.*}} : memref<?x32xf32>) outs(%{{.*}} : memref<?x32xf32>)
  plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%y : memref<?x32xf32>)
  // CHECK: plan.collective all_reduce ins(%{{.*}} : memref<?x32xbf16>) outs(%{{.*}} : memref<?x32xbf16>) {stream = 1 : i64}
  plan.collective all_reduce ins(%b : memref<?x32xbf16>) outs(%b : memref<?x32xbf16>) {stream = 1 : i64}
  // CHECK: plan.collective all_reduce ins(%{{.*}} : memref<?x32xf32>) outs(%{{.*}} : memref<?x32xf32>) {group = #plan.group<tensor, [0, 1]>}
  plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%x : memref<?x32xf32>) {group = #plan.group<tensor, [0, 1]>}
  // CHECK: plan.collective all_gather ins(%{{.*}} : memref<?x32xf32>) outs(%{{.*}} : memref<2x?x32xf32>)
  plan.collective all_gather ins(%x : memref<?x32xf32>) outs(%g : memref<2x?x32xf32>)
  // CHECK: plan.collective all_to_all_v ins(%{{.*}}, %{{.*}} : memref<?x3x32xf32>, memref<?x3xi32>) outs(%{{.*}}, %{{.*}} : memref<?x6x32xf32>, memref<?x6xi32>)
  plan.collective all_to_all_v ins(%rows, %slots : memref<?x3x32xf32>, memref<?x3xi32>) outs(%in, %inSlots : memref<?x6x32xf32>, memref<?x6xi32>)
  // CHECK: plan.collective all_to_all_v ins(%{{.*}} : memref<?x6x32xf32>) outs(%{{.*}} : memref<?x3x32xf32>)
  plan.collective all_to_all_v ins(%in : memref<?x6x32xf32>) outs(%rows : memref<?x3x32xf32>)
  return
}

// -----

func.func @unknown_kind() {
  %x = plan.alloc : memref<?x32xf32>
  // expected-error @+1 {{custom op 'plan.collective' expected string or keyword containing one of the following enum values for attribute 'kind' [all_reduce, all_gather, all_to_all_v]}}
  plan.collective broadcast ins(%x : memref<?x32xf32>) outs(%x : memref<?x32xf32>)
  return
}

// -----

func.func @wrong_arity() {
  %x = plan.alloc : memref<?x32xf32>
  // expected-error @+1 {{'plan.collective' op 'all_reduce' takes 1 input(s) and 1 output(s), got 2 and 1}}
  plan.collective all_reduce ins(%x, %x : memref<?x32xf32>, memref<?x32xf32>) outs(%x : memref<?x32xf32>)
  return
}

// -----

func.func @integer_data() {
  %x = plan.alloc : memref<?x32xi32>
  // expected-error @+1 {{'plan.collective' op moves f32 or bf16 data, the same in and out; got 'memref<?x32xi32>' and 'memref<?x32xi32>'}}
  plan.collective all_reduce ins(%x : memref<?x32xi32>) outs(%x : memref<?x32xi32>)
  return
}

// -----

func.func @mixed_types() {
  %x = plan.alloc : memref<?x32xf32>
  %y = plan.alloc : memref<?x32xbf16>
  // expected-error @+1 {{'plan.collective' op moves f32 or bf16 data, the same in and out; got 'memref<?x32xf32>' and 'memref<?x32xbf16>'}}
  plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%y : memref<?x32xbf16>)
  return
}

// -----

func.func @reduce_changes_shape() {
  %x = plan.alloc : memref<?x32xf32>
  %y = plan.alloc : memref<?x16xf32>
  // expected-error @+1 {{'plan.collective' op 'all_reduce' keeps the shape; got 'memref<?x32xf32>' and 'memref<?x16xf32>'}}
  plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%y : memref<?x16xf32>)
  return
}

// -----

func.func @gather_without_rank_dimension() {
  %x = plan.alloc : memref<?x32xf32>
  %y = plan.alloc : memref<?x32xf32>
  // expected-error @+1 {{'plan.collective' op 'all_gather' gives [ranks] + the input's shape; got 'memref<?x32xf32>' and 'memref<?x32xf32>'}}
  plan.collective all_gather ins(%x : memref<?x32xf32>) outs(%y : memref<?x32xf32>)
  return
}

// -----

func.func @exchange_of_a_matrix() {
  %x = plan.alloc : memref<?x32xf32>
  %g = plan.alloc : memref<?x64xf32>
  %n = plan.alloc : memref<?xi32>
  %m = plan.alloc : memref<?xi32>
  // expected-error @+1 {{'plan.collective' op 'all_to_all_v' sends rows [T, P, H] as [T, ranks x P, H]; got 'memref<?x32xf32>' and 'memref<?x64xf32>'}}
  plan.collective all_to_all_v ins(%x, %n : memref<?x32xf32>, memref<?xi32>) outs(%g, %m : memref<?x64xf32>, memref<?xi32>)
  return
}

// -----

func.func @exchange_returns_to_fewer_picks() {
  %y = plan.alloc : memref<?x4x32xf32>
  %back = plan.alloc : memref<?x3x32xf32>
  // expected-error @+1 {{'plan.collective' op 'all_to_all_v' returns rows [T, P, H] as [T, ranks x P, H]; got 'memref<?x4x32xf32>' and 'memref<?x3x32xf32>'}}
  plan.collective all_to_all_v ins(%y : memref<?x4x32xf32>) outs(%back : memref<?x3x32xf32>)
  return
}

// -----

func.func @exchange_slots() {
  %rows = plan.alloc : memref<?x3x32xf32>
  %slots = plan.alloc : memref<?x3xf32>
  %in = plan.alloc : memref<?x6x32xf32>
  %inSlots = plan.alloc : memref<?x6xi32>
  // expected-error @+1 {{'plan.collective' op 'all_to_all_v' slots are i32 [T, P] out and [T, ranks x P] in; got 'memref<?x3xf32>' and 'memref<?x6xi32>'}}
  plan.collective all_to_all_v ins(%rows, %slots : memref<?x3x32xf32>, memref<?x3xf32>) outs(%in, %inSlots : memref<?x6x32xf32>, memref<?x6xi32>)
  return
}

// -----

func.func @exchange_arity() {
  %rows = plan.alloc : memref<?x3x32xf32>
  // expected-error @+1 {{'plan.collective' op 'all_to_all_v' takes 2 inputs and 2 outputs (rows and slots out) or 1 and 1 (rows back), got 1 and 2}}
  plan.collective all_to_all_v ins(%rows : memref<?x3x32xf32>) outs(%rows, %rows : memref<?x3x32xf32>, memref<?x3x32xf32>)
  return
}

// -----

func.func @writes_a_weight() {
  %x = plan.alloc : memref<?x32xf32>
  %w = plan.weight "w" : memref<4x32xf32>
  %g = plan.alloc : memref<4x32xf32>
  // expected-error @+1 {{'plan.collective' op writes a buffer that is not a plan.alloc}}
  plan.collective all_reduce ins(%g : memref<4x32xf32>) outs(%w : memref<4x32xf32>)
  return
}

// -----

func.func @stream_out_of_range() {
  %x = plan.alloc : memref<?x32xf32>
  // expected-error @+1 {{'plan.collective' op stream must be in [0, 255], got 300}}
  plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%x : memref<?x32xf32>) {stream = 300 : i64}
  return
}

// -----

func.func @rank1() attributes {plan.rank = 1 : i64} {
  %x = plan.alloc : memref<?x32xf32>
  // expected-error @+1 {{'plan.collective' op runs in rank 1's program, but its group #plan.group<tensor, [2, 3]> does not include it}}
  plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%x : memref<?x32xf32>) {group = #plan.group<tensor, [2, 3]>}
  return
}

// -----

func.func @unsorted_group() {
  %x = plan.alloc : memref<?x32xf32>
  // expected-error @+1 {{a process group's ranks are ascending, distinct and not negative; got 1 at position 1}}
  plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%x : memref<?x32xf32>) {group = #plan.group<data, [3, 1]>}
  return
}

// -----

func.func @empty_group() {
  %x = plan.alloc : memref<?x32xf32>
  // expected-error @+2 {{expected integer value}}
  // expected-error @+1 {{failed to parse Plan_GroupAttr parameter 'ranks'}}
  plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%x : memref<?x32xf32>) {group = #plan.group<expert, []>}
  return
}
