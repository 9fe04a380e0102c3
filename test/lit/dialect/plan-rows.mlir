// plan.rows, a micro-batch's rows of a token-led buffer: it prints and
// parses back, launches and collectives take it like a buffer, and each
// verifier error (its base, its type, its part; an op mixing parts or
// taking a whole token-led buffer beside a part) quotes what is wrong.
// RUN: moe-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s -split-input-file -verify-diagnostics | moe-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @parts
// CHECK: %[[X:.*]] = plan.alloc : memref<?x8xf32>
// CHECK-NEXT: %[[X1:.*]] = plan.rows %[[X]] part 1 of 3 : memref<?x8xf32>
// CHECK: plan.launch add ins(%[[X1]], %[[X1]] : memref<?x8xf32>, memref<?x8xf32>) outs(%[[Y1:.*]] : memref<?x8xf32>)
// CHECK: plan.collective all_reduce ins(%[[Y1]] : memref<?x8xf32>) outs(%[[Y1]] : memref<?x8xf32>) {stream = 1 : i64}
func.func @parts() {
  %tokens = plan.input 0 : memref<?xi32>
  %t1 = plan.rows %tokens part 1 of 3 : memref<?xi32>
  %x = plan.alloc : memref<?x8xf32>
  %x1 = plan.rows %x part 1 of 3 : memref<?x8xf32>
  %y = plan.alloc : memref<?x8xf32>
  %y1 = plan.rows %y part 1 of 3 : memref<?x8xf32>
  plan.launch add ins(%x1, %x1 : memref<?x8xf32>, memref<?x8xf32>) outs(%y1 : memref<?x8xf32>)
  plan.collective all_reduce ins(%y1 : memref<?x8xf32>) outs(%y1 : memref<?x8xf32>) {stream = 1 : i64}
  return
}

// -----

func.func @rows_of_a_weight() {
  %w = plan.weight "w" : memref<4x8xf32>
  // expected-error @+1 {{'plan.rows' op views rows of a plan.alloc or a plan.input}}
  %r = plan.rows %w part 0 of 2 : memref<4x8xf32>
  return
}

// -----

func.func @rows_of_rows() {
  %x = plan.alloc : memref<?x8xf32>
  %x0 = plan.rows %x part 0 of 2 : memref<?x8xf32>
  // expected-error @+1 {{'plan.rows' op views rows of a plan.alloc or a plan.input}}
  %x00 = plan.rows %x0 part 0 of 2 : memref<?x8xf32>
  return
}

// -----

func.func @static_rows() {
  %x = plan.alloc : memref<4x8xf32>
  // expected-error @+1 {{'plan.rows' op views the token rows of a buffer whose dimension 0 is dynamic, got 'memref<4x8xf32>'}}
  %r = plan.rows %x part 0 of 2 : memref<4x8xf32>
  return
}

// -----

func.func @one_part() {
  %x = plan.alloc : memref<?x8xf32>
  // expected-error @+1 {{'plan.rows' op part 0 of 1: expected 2 or more parts and a part in [0, parts)}}
  %r = plan.rows %x part 0 of 1 : memref<?x8xf32>
  return
}

// -----

func.func @part_out_of_range() {
  %x = plan.alloc : memref<?x8xf32>
  // expected-error @+1 {{'plan.rows' op part 2 of 2: expected 2 or more parts and a part in [0, parts)}}
  %r = plan.rows %x part 2 of 2 : memref<?x8xf32>
  return
}

// -----

func.func @other_type() {
  %x = plan.alloc : memref<?x8xf32>
  // expected-error @+1 {{'plan.rows' op failed to verify that all of {base, result} have same type}}
  %r = "plan.rows"(%x) {part = 0 : i64, parts = 2 : i64} : (memref<?x8xf32>) -> memref<?x4xf32>
  return
}

// -----

func.func @mixed_parts() {
  %x = plan.alloc : memref<?x8xf32>
  %x0 = plan.rows %x part 0 of 2 : memref<?x8xf32>
  %x1 = plan.rows %x part 1 of 2 : memref<?x8xf32>
  %y = plan.alloc : memref<?x8xf32>
  %y0 = plan.rows %y part 0 of 2 : memref<?x8xf32>
  // expected-error @+1 {{'plan.launch' op takes rows of part 0 of 2; every operand led by the step's tokens must be a plan.rows view of that part}}
  plan.launch add ins(%x0, %x1 : memref<?x8xf32>, memref<?x8xf32>) outs(%y0 : memref<?x8xf32>)
  return
}

// -----

func.func @whole_beside_part() {
  %x = plan.alloc : memref<?x8xf32>
  %y = plan.alloc : memref<?x8xf32>
  %y0 = plan.rows %y part 0 of 2 : memref<?x8xf32>
  // expected-error @+1 {{'plan.collective' op takes rows of part 0 of 2; every operand led by the step's tokens must be a plan.rows view of that part}}
  plan.collective all_reduce ins(%x : memref<?x8xf32>) outs(%y0 : memref<?x8xf32>)
  return
}
