// --moe-verify-schedule refuses a plan in which two streams touch the same
// buffer (or overlapping arena bytes), one of them writing, with no
// plan.record / plan.wait ordering them. One-stream plans always pass.
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-verify-schedule | FileCheck %s

// Ordered: stream 1 waits for a before reading it, stream 0 waits for b.
// CHECK-LABEL: func.func @ordered()
func.func @ordered() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %c = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  %e0 = plan.record stream 0 : !plan.event
  plan.wait %e0 stream 1
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>) {stream = 1 : i64}
  %e1 = plan.record stream 1 : !plan.event
  plan.wait %e1 stream 0
  plan.launch add ins(%a, %b : memref<?x32xf32>, memref<?x32xf32>) outs(%c : memref<?x32xf32>)
  plan.output %c : memref<?x32xf32>
  return
}

// -----

// Two readers of one buffer on different streams need no order; an event
// chain through a third stream orders as well as a direct one.
// CHECK-LABEL: func.func @readers_and_chains()
func.func @readers_and_chains() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %c = plan.alloc : memref<?x32xf32>
  %d = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  %e0 = plan.record stream 0 : !plan.event
  plan.wait %e0 stream 1
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>) {stream = 1 : i64}
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%c : memref<?x32xf32>)
  %e1 = plan.record stream 1 : !plan.event
  plan.wait %e1 stream 2
  %e2 = plan.record stream 2 : !plan.event
  plan.wait %e2 stream 0
  plan.launch add ins(%b, %c : memref<?x32xf32>, memref<?x32xf32>) outs(%d : memref<?x32xf32>)
  plan.output %d : memref<?x32xf32>
  return
}

// -----

// Stream 0 reads b without waiting for stream 1, which writes it.
func.func @read_after_write() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  %c = plan.alloc : memref<?x32xf32>
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  %e0 = plan.record stream 0 : !plan.event
  plan.wait %e0 stream 1
  // expected-note @below {{the other access: plan.launch linear on stream 1}}
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>) {stream = 1 : i64}
  %e1 = plan.record stream 1 : !plan.event
  // expected-error @below {{plan.launch add on stream 0 reads a buffer that plan.launch linear on stream 1 writes, with no event ordering them: plan.record after the first and plan.wait for it before the second}}
  plan.launch add ins(%a, %b : memref<?x32xf32>, memref<?x32xf32>) outs(%c : memref<?x32xf32>)
  plan.wait %e1 stream 0
  plan.output %c : memref<?x32xf32>
  return
}

// -----

// Stream 1 reads a before stream 0's wait would order it: the record is
// there but the wait is on the wrong side of the read.
func.func @wait_too_late() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %w = plan.weight "w" : memref<32x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  // expected-note @below {{the other access: plan.launch embedding on stream 0}}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  %e0 = plan.record stream 0 : !plan.event
  // expected-error @below {{plan.launch linear on stream 1 reads a buffer that plan.launch embedding on stream 0 writes}}
  plan.launch linear ins(%a, %w : memref<?x32xf32>, memref<32x32xbf16>) outs(%b : memref<?x32xf32>) {stream = 1 : i64}
  plan.wait %e0 stream 1
  plan.output %b : memref<?x32xf32>
  return
}

// -----

// Two writers of one buffer (write after write).
func.func @write_after_write() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  // expected-note @below {{the other access: plan.launch embedding on stream 1}}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>) {stream = 1 : i64}
  // expected-error @below {{plan.launch embedding on stream 0 writes a buffer that plan.launch embedding on stream 1 writes}}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  plan.output %a : memref<?x32xf32>
  return
}

// -----

// Different buffers whose planned arena bytes overlap race as well: b
// [0, 512) and c [256, 768) share bytes.
func.func @arena_overlap() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %b = plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
  %c = plan.alloc {offset = 256 : i64, size = 512 : i64} : memref<?x32xf32>
  // expected-note @below {{the other access: plan.launch embedding on stream 1}}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%b : memref<?x32xf32>) {stream = 1 : i64}
  // expected-error @below {{plan.launch embedding on stream 0 writes a buffer that plan.launch embedding on stream 1 writes (their arena bytes overlap)}}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%c : memref<?x32xf32>)
  plan.output %c : memref<?x32xf32>
  return
}

// -----

// The program's output is read on stream 0: a stream-1 write to it must be
// waited for.
func.func @output_unordered() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  // expected-note @below {{the other access: plan.launch embedding on stream 1}}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>) {stream = 1 : i64}
  // expected-error @below {{plan.output on stream 0 reads a buffer that plan.launch embedding on stream 1 writes}}
  plan.output %a : memref<?x32xf32>
  return
}

// -----

// A KV-cache layer is read and written by its attention launch: two
// attention launches on one layer from different streams race although
// their activation buffers differ.
func.func @kv_layer() {
  %positions = plan.input 1 : memref<?xi32>
  %kv0 = plan.kv_cache 0 gqa k_width 16 v_width 16 : !plan.kv_cache
  %q = plan.alloc : memref<?x32xf32>
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  // expected-note @below {{the other access: plan.launch attention on stream 1}}
  plan.launch attention ins(%q, %q, %q, %positions : memref<?x32xf32>, memref<?x32xf32>, memref<?x32xf32>, memref<?xi32>) outs(%a : memref<?x32xf32>) kv %kv0 params #plan.attention<layer = 0, num_heads = 4, num_kv_heads = 2, head_dim = 8, scale = 0.35 : f32, rope = <inv_freq = [1.0, 0.1, 0.01, 0.001], attention_factor = 1.0 : f32, interleaved = false>, sliding_window = 0, qk_norm_eps = 0.0 : f32> {stream = 1 : i64}
  // expected-error @below {{plan.launch attention on stream 0 writes KV-cache layer 0 that plan.launch attention on stream 1 writes}}
  plan.launch attention ins(%q, %q, %q, %positions : memref<?x32xf32>, memref<?x32xf32>, memref<?x32xf32>, memref<?xi32>) outs(%b : memref<?x32xf32>) kv %kv0 params #plan.attention<layer = 0, num_heads = 4, num_kv_heads = 2, head_dim = 8, scale = 0.35 : f32, rope = <inv_freq = [1.0, 0.1, 0.01, 0.001], attention_factor = 1.0 : f32, interleaved = false>, sliding_window = 0, qk_norm_eps = 0.0 : f32>
  plan.output %b : memref<?x32xf32>
  return
}

// -----

// Collectives run on one stream, so that every rank runs them in the same
// order.
func.func @collectives_on_two_streams() {
  %a = plan.alloc : memref<?x32xf32>
  %b = plan.alloc : memref<?x32xf32>
  plan.collective all_reduce ins(%a : memref<?x32xf32>) outs(%a : memref<?x32xf32>)
  // expected-error @+1 {{moe-verify-schedule: collectives run on one stream (here 1, before on 0), so that every rank runs them in the same order}}
  plan.collective all_reduce ins(%b : memref<?x32xf32>) outs(%b : memref<?x32xf32>) {stream = 1 : i64}
  return
}

// -----

// A collective is a step like a launch: its reads and writes are ordered
// against other streams by events.
func.func @collective_races_a_launch() {
  %t = plan.input 0 : memref<?xi32>
  %emb = plan.weight "embed" : memref<96x32xbf16>
  %a = plan.alloc : memref<?x32xf32>
  // expected-note @+1 {{the other access: plan.launch embedding on stream 0}}
  plan.launch embedding ins(%t, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%a : memref<?x32xf32>)
  // expected-error @+1 {{plan.collective all_reduce on stream 1 writes a buffer that plan.launch embedding on stream 0 writes, with no event ordering them}}
  plan.collective all_reduce ins(%a : memref<?x32xf32>) outs(%a : memref<?x32xf32>) {stream = 1 : i64}
  return
}
