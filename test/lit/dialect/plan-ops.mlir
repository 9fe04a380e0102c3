// Every plan op parses, verifies and prints back to a form that parses again:
// plan.weight (plain, block-scaled and in panels), plan.input, plan.alloc (with and
// without the planner's offset/size), plan.kv_cache (gqa and mla),
// plan.launch (with and without a KV-cache layer, typed kernel parameters,
// the default stream elided and a non-default one kept) and plan.output.
// RUN: moe-opt %s | moe-opt | FileCheck %s

// CHECK-LABEL: func.func @main
func.func @main() {
  // CHECK: %[[KV0:.*]] = plan.kv_cache 0 gqa k_width 16 v_width 16 : !plan.kv_cache
  %kv0 = plan.kv_cache 0 gqa k_width 16 v_width 16 : !plan.kv_cache
  // CHECK: %[[KV1:.*]] = plan.kv_cache 1 mla k_width 16 v_width 4 : !plan.kv_cache
  %kv1 = plan.kv_cache 1 mla k_width 16 v_width 4 : !plan.kv_cache
  // CHECK: %[[TOK:.*]] = plan.input 0 : memref<?xi32>
  %tokens = plan.input 0 : memref<?xi32>
  // CHECK: %[[POS:.*]] = plan.input 1 : memref<?xi32>
  %positions = plan.input 1 : memref<?xi32>
  // CHECK: %[[EMB:.*]] = plan.weight "model.embed_tokens.weight" : memref<96x32xbf16>
  %emb = plan.weight "model.embed_tokens.weight" : memref<96x32xbf16>
  // CHECK: %[[QW:.*]] = plan.weight "q_b.weight" scale "q_b.weight_scale_inv" block [16, 16] : memref<32x32xf8E4M3FN>
  %qw = plan.weight "q_b.weight" scale "q_b.weight_scale_inv" block [16, 16] : memref<32x32xf8E4M3FN>
  // CHECK: plan.weight "k.weight" panels : memref<16x32xbf16>
  %kw = plan.weight "k.weight" panels : memref<16x32xbf16>
  // CHECK: %[[QB:.*]] = plan.weight "q.bias" : memref<32xbf16>
  %qb = plan.weight "q.bias" : memref<32xbf16>
  // CHECK: %[[NW:.*]] = plan.weight "norm.weight" : memref<32xbf16>
  %nw = plan.weight "norm.weight" : memref<32xbf16>
  // CHECK: %[[GW:.*]] = plan.weight "mlp.gate.weight" : memref<4x32xbf16>
  %gw = plan.weight "mlp.gate.weight" : memref<4x32xbf16>

  // CHECK: %[[H:.*]] = plan.alloc : memref<?x32xf32>
  %h = plan.alloc : memref<?x32xf32>
  // CHECK: %[[X:.*]] = plan.alloc {offset = 4096 : i64, size = 4096 : i64} : memref<?x32xf32>
  %x = plan.alloc {offset = 4096 : i64, size = 4096 : i64} : memref<?x32xf32>
  // CHECK: %[[Q:.*]] = plan.alloc {offset = 0 : i64} : memref<?x32xf32>
  %q = plan.alloc {offset = 0 : i64} : memref<?x32xf32>
  // CHECK: %[[A:.*]] = plan.alloc {size = 4096 : i64} : memref<?x32xf32>
  %a = plan.alloc {size = 4096 : i64} : memref<?x32xf32>
  // CHECK: %[[M:.*]] = plan.alloc : memref<?x32xf32>
  %m = plan.alloc : memref<?x32xf32>
  // CHECK: %[[RW:.*]] = plan.alloc : memref<?x2xf32>
  %rw = plan.alloc : memref<?x2xf32>
  // CHECK: %[[RI:.*]] = plan.alloc : memref<?x2xi32>
  %ri = plan.alloc : memref<?x2xi32>
  // CHECK: %[[S:.*]] = plan.alloc : memref<4x8xf32>
  %s = plan.alloc : memref<4x8xf32>

  // No kv, no parameters, default stream (0) not printed.
  // CHECK: plan.launch embedding ins(%[[TOK]], %[[EMB]] : memref<?xi32>, memref<96x32xbf16>) outs(%[[H]] : memref<?x32xf32>){{$}}
  plan.launch embedding ins(%tokens, %emb : memref<?xi32>, memref<96x32xbf16>) outs(%h : memref<?x32xf32>)
  // CHECK: plan.launch rms_norm ins(%[[H]], %[[NW]] : memref<?x32xf32>, memref<32xbf16>) outs(%[[X]] : memref<?x32xf32>) params #plan.rms_norm<eps = 9.99999997E-7 : f32>{{$}}
  plan.launch rms_norm ins(%h, %nw : memref<?x32xf32>, memref<32xbf16>) outs(%x : memref<?x32xf32>) params #plan.rms_norm<eps = 1.0e-6 : f32>
  // Three inputs (bias), on stream 1.
  // CHECK: plan.launch linear ins(%[[X]], %[[QW]], %[[QB]] : memref<?x32xf32>, memref<32x32xf8E4M3FN>, memref<32xbf16>) outs(%[[Q]] : memref<?x32xf32>) {stream = 1 : i64}{{$}}
  plan.launch linear ins(%x, %qw, %qb : memref<?x32xf32>, memref<32x32xf8E4M3FN>, memref<32xbf16>) outs(%q : memref<?x32xf32>) {stream = 1 : i64}
  // An explicit stream 0 is the default and is elided; a kernel name may be quoted.
  // CHECK: plan.launch add ins(%[[H]], %[[Q]] : memref<?x32xf32>, memref<?x32xf32>) outs(%[[M]] : memref<?x32xf32>){{$}}
  plan.launch "add" ins(%h, %q : memref<?x32xf32>, memref<?x32xf32>) outs(%m : memref<?x32xf32>) {stream = 0 : i64}
  // A KV-cache layer and typed parameters (fields in declaration order).
  // CHECK: plan.launch attention ins(%[[Q]], %[[X]], %[[X]], %[[POS]] : memref<?x32xf32>, memref<?x32xf32>, memref<?x32xf32>, memref<?xi32>) outs(%[[A]] : memref<?x32xf32>) kv %[[KV0]] params #plan.attention<layer = 0, num_heads = 4, num_kv_heads = 2, head_dim = 8, scale = 0.353553385 : f32, rope = <inv_freq = [1.000000e+00, 1.000000e-01, 1.000000e-02, 1.000000e-03], attention_factor = 1.000000e+00 : f32, interleaved = false>, sliding_window = 0, qk_norm_eps = 9.99999997E-7 : f32>{{$}}
  plan.launch attention ins(%q, %x, %x, %positions : memref<?x32xf32>, memref<?x32xf32>, memref<?x32xf32>, memref<?xi32>) outs(%a : memref<?x32xf32>) kv %kv0 params #plan.attention<layer = 0, num_heads = 4, num_kv_heads = 2, head_dim = 8, scale = 0.353553385 : f32, rope = <inv_freq = [1.0, 0.1, 0.01, 0.001], attention_factor = 1.0 : f32, interleaved = false>, sliding_window = 0, qk_norm_eps = 1.0e-6 : f32>
  // KV-cache layer and a non-default stream together; fields in any order.
  // CHECK: plan.launch mla_attention ins(%[[Q]], %[[X]], %[[NW]], %[[EMB]], %[[POS]] : memref<?x32xf32>, memref<?x32xf32>, memref<32xbf16>, memref<96x32xbf16>, memref<?xi32>) outs(%[[A]] : memref<?x32xf32>) kv %[[KV1]] params #plan.mla<layer = 1, num_heads = 4, kv_lora_rank = 16, qk_nope_head_dim = 4, qk_rope_head_dim = 4, v_head_dim = 8, scale = 2.500000e-01 : f32, rope = <inv_freq = [1.000000e+00, 1.000000e-02], attention_factor = 1.000000e+00 : f32, interleaved = true>, norm_eps = 9.99999997E-7 : f32> {stream = 2 : i64}{{$}}
  plan.launch mla_attention ins(%q, %x, %nw, %emb, %positions : memref<?x32xf32>, memref<?x32xf32>, memref<32xbf16>, memref<96x32xbf16>, memref<?xi32>) outs(%a : memref<?x32xf32>) kv %kv1 params #plan.mla<num_heads = 4, layer = 1, kv_lora_rank = 16, qk_nope_head_dim = 4, qk_rope_head_dim = 4, v_head_dim = 8, scale = 0.25 : f32, rope = #plan.rope<inv_freq = [1.0, 0.01], attention_factor = 1.0 : f32, interleaved = true>, norm_eps = 1.0e-6 : f32> {stream = 2 : i64}
  // Two outputs; router enums as keywords.
  // CHECK: plan.launch router ins(%[[M]], %[[GW]] : memref<?x32xf32>, memref<4x32xbf16>) outs(%[[RW]], %[[RI]] : memref<?x2xf32>, memref<?x2xi32>) params #plan.router<num_experts = 4, top_k = 2, scoring = softmax, method = greedy, norm_topk_prob = false, n_group = 1, topk_group = 1, routed_scaling_factor = 1.000000e+00 : f32, layer = -1>{{$}}
  plan.launch router ins(%m, %gw : memref<?x32xf32>, memref<4x32xbf16>) outs(%rw, %ri : memref<?x2xf32>, memref<?x2xi32>) params #plan.router<num_experts = 4, top_k = 2, scoring = softmax, method = greedy, norm_topk_prob = false, n_group = 1, topk_group = 1, routed_scaling_factor = 1.0 : f32, layer = -1>
  // A static-shape buffer.
  // CHECK: plan.launch silu_mul ins(%[[X]], %[[H]] : memref<?x32xf32>, memref<?x32xf32>) outs(%[[S]] : memref<4x8xf32>){{$}}
  plan.launch silu_mul ins(%x, %h : memref<?x32xf32>, memref<?x32xf32>) outs(%s : memref<4x8xf32>)
  // An event recorded on stream 2 and waited for on stream 0.
  // CHECK: %[[E:.*]] = plan.record stream 2 : !plan.event
  %e = plan.record stream 2 : !plan.event
  // CHECK-NEXT: plan.wait %[[E]] stream 0{{$}}
  plan.wait %e stream 0
  // CHECK: plan.output %[[A]] : memref<?x32xf32>
  plan.output %a : memref<?x32xf32>
  // CHECK-NEXT: return
  return
}
