// --moe-to-plan replaces func.func @forward (moe ops on tensors) by
// func.func @main (plan ops on memrefs): arguments become plan.input,
// weights plan.weight, every result a fresh plan.alloc written by one
// plan.launch whose typed params attribute carries the kernel parameters. Checked per
// moe op: linear (+bias), embedding, rms_norm, lm_head, swiglu_mlp (three
// linears and a silu_mul), shared_expert (+sigmoid_gate), router and experts,
// attention (gqa KV cache, RoPE inverse frequencies), mla_attention (mla KV
// cache); the module's plan.max_context = min(max-context,
// max_position_embeddings); the errors; and a real imported DeepSeek-V3
// checkpoint.
// RUN: moe-opt %s -split-input-file --moe-to-plan | FileCheck %s
// RUN: moe-opt %s -split-input-file --moe-to-plan=max-context=64 | FileCheck %s --check-prefix=CTX

// The errors: no @forward, and a non-positive context.
// RUN: echo 'module { func.func @main() { return } }' | not moe-opt --moe-to-plan 2>&1 | FileCheck %s --check-prefix=NOFWD
// NOFWD: error: moe-to-plan: the module has no func.func @forward
// RUN: not moe-opt %s -split-input-file --moe-to-plan=max-context=0 2>&1 | FileCheck %s --check-prefix=CTX0
// CTX0: error: moe-to-plan: max-context must be positive, got 0

// A real checkpoint: MLA attention in both layers, a dense first layer, a
// sigmoid noaux_tc router with correction bias, experts and a shared expert.
// RUN: rm -rf %t && %mkckpt --model-type deepseek_v3 --out %t
// RUN: moe-import %t | moe-opt --moe-to-plan | FileCheck %s --check-prefix=DSV3

// DSV3: module attributes {{.*}}moe.model_type = "deepseek_v3", plan.max_context = 128 : i64}
// DSV3: func.func @main()
// DSV3-NEXT: %[[KV1:.*]] = plan.kv_cache 1 mla k_width 16 v_width 4 : !plan.kv_cache
// DSV3-NEXT: %[[KV0:.*]] = plan.kv_cache 0 mla k_width 16 v_width 4 : !plan.kv_cache
// DSV3-NEXT: plan.input 0 : memref<?xi32>
// DSV3-NEXT: %[[POS:.*]] = plan.input 1 : memref<?xi32>
// DSV3: plan.launch mla_attention ins({{.*}}, %[[POS]] : memref<?x48xf32>, memref<?x20xf32>, memref<16xbf16>, memref<56x16xbf16>, memref<?xi32>) outs({{.*}} : memref<?x24xf32>) kv %[[KV0]] params #plan.mla<layer = 0, num_heads = 4, kv_lora_rank = 16, qk_nope_head_dim = 8, qk_rope_head_dim = 4, v_head_dim = 6, scale = 0.288675129 : f32, rope = <inv_freq = [1.000000e+00, 1.000000e-02], attention_factor = 1.000000e+00 : f32, interleaved = true>, norm_eps = 9.99999997E-7 : f32>
// DSV3: plan.launch silu_mul ins({{.*}} : memref<?x40xf32>, memref<?x40xf32>) outs({{.*}} : memref<?x40xf32>)
// DSV3: kv %[[KV1]] params #plan.mla<layer = 1,
// DSV3: plan.launch router ins({{.*}} : memref<?x32xf32>, memref<8x32xbf16>, memref<8xf32>) outs({{.*}} : memref<?x2xf32>, memref<?x2xi32>) params #plan.router<num_experts = 8, top_k = 2, scoring = sigmoid, method = noaux_tc, norm_topk_prob = true, n_group = 4, topk_group = 2, routed_scaling_factor = 2.500000e+00 : f32, layer = 1>
// DSV3: plan.weight "model.layers.1.mlp.experts.{e}.down_proj.weight" : memref<8x32x16xbf16>
// DSV3: plan.launch experts {{.*}} params #plan.experts<num_experts = 8, intermediate = 16, fused_gate_up = false, num_shared = 0, grouped = false>
// DSV3: plan.weight "model.layers.1.mlp.shared_experts.down_proj.weight" : memref<32x16xbf16>
// DSV3: %[[LOGITS:.*]] = plan.alloc : memref<?x96xf32>
// DSV3-NEXT: plan.launch linear ins({{.*}} : memref<?x32xf32>, memref<96x32xbf16>) outs(%[[LOGITS]] : memref<?x96xf32>)
// DSV3-NEXT: plan.output %[[LOGITS]] : memref<?x96xf32>
// DSV3-NEXT: return
// DSV3-NOT: moe.
// DSV3-NOT: @forward

// Embedding, rms_norm, linear with and without bias, lm_head. With no
// max_position_embeddings the context is the option's value.
// CHECK: module attributes {plan.max_context = 4096 : i64}
// CTX: module attributes {plan.max_context = 64 : i64}
// CHECK-NOT: @forward
// CHECK-LABEL: func.func @main()
// CHECK-NEXT: %[[TOK:.*]] = plan.input 0 : memref<?xi32>
// CHECK-NEXT: plan.input 1 : memref<?xi32>
// CHECK-NEXT: %[[EMB:.*]] = plan.weight "embed" : memref<96x32xbf16>
// CHECK-NEXT: %[[H:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch embedding ins(%[[TOK]], %[[EMB]] : memref<?xi32>, memref<96x32xbf16>) outs(%[[H]] : memref<?x32xf32>)
// CHECK-NEXT: %[[NW:.*]] = plan.weight "norm.weight" : memref<32xbf16>
// CHECK-NEXT: %[[X:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch rms_norm ins(%[[H]], %[[NW]] : memref<?x32xf32>, memref<32xbf16>) outs(%[[X]] : memref<?x32xf32>) params #plan.rms_norm<eps = 9.99999997E-7 : f32>
// CHECK-NEXT: %[[QW:.*]] = plan.weight "q.weight" : memref<16x32xbf16>
// CHECK-NEXT: %[[QB:.*]] = plan.weight "q.bias" : memref<16xbf16>
// CHECK-NEXT: %[[Q:.*]] = plan.alloc : memref<?x16xf32>
// CHECK-NEXT: plan.launch linear ins(%[[X]], %[[QW]], %[[QB]] : memref<?x32xf32>, memref<16x32xbf16>, memref<16xbf16>) outs(%[[Q]] : memref<?x16xf32>){{$}}
// CHECK-NEXT: %[[OW:.*]] = plan.weight "o.weight" : memref<32x16xbf16>
// CHECK-NEXT: %[[O:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch linear ins(%[[Q]], %[[OW]] : memref<?x16xf32>, memref<32x16xbf16>) outs(%[[O]] : memref<?x32xf32>){{$}}
// CHECK-NEXT: %[[L:.*]] = plan.alloc : memref<?x96xf32>
// CHECK-NEXT: plan.launch linear ins(%[[O]], %[[EMB]] : memref<?x32xf32>, memref<96x32xbf16>) outs(%[[L]] : memref<?x96xf32>){{$}}
// CHECK-NEXT: plan.output %[[L]] : memref<?x96xf32>
// CHECK-NEXT: return
module {
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x96xf32> {
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %h = moe.embedding %tokens, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %nw = moe.weight "norm.weight" : tensor<32xbf16>
  %x = moe.rms_norm %h, %nw eps 1.0e-6 : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  %qw = moe.weight "q.weight" : tensor<16x32xbf16>
  %qb = moe.weight "q.bias" : tensor<16xbf16>
  %q = moe.linear %x, %qw bias %qb : (tensor<?x32xf32>, tensor<16x32xbf16>, tensor<16xbf16>) -> tensor<?x16xf32>
  %ow = moe.weight "o.weight" : tensor<32x16xbf16>
  %o = moe.linear %q, %ow : (tensor<?x16xf32>, tensor<32x16xbf16>) -> tensor<?x32xf32>
  %l = moe.lm_head %o, %emb : (tensor<?x32xf32>, tensor<96x32xbf16>) -> tensor<?x96xf32>
  return %l : tensor<?x96xf32>
}
}

// -----

// swiglu_mlp: gate and up linears into two ?x56 buffers, silu_mul into a
// third, the down linear into a buffer of the input's shape. Context:
// max_position_embeddings (32) is below both 4096 and 64.
// CHECK: module attributes {moe.config = {max_position_embeddings = 32 : i64}, plan.max_context = 32 : i64}
// CTX: module attributes {moe.config = {max_position_embeddings = 32 : i64}, plan.max_context = 32 : i64}
// CHECK-LABEL: func.func @main()
// CHECK: %[[X:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch embedding
// CHECK-NEXT: %[[GW:.*]] = plan.weight "mlp.gate_proj.weight" : memref<56x32xbf16>
// CHECK-NEXT: %[[UW:.*]] = plan.weight "mlp.up_proj.weight" : memref<56x32xbf16>
// CHECK-NEXT: %[[DW:.*]] = plan.weight "mlp.down_proj.weight" : memref<32x56xbf16>
// CHECK-NEXT: %[[G:.*]] = plan.alloc : memref<?x56xf32>
// CHECK-NEXT: %[[U:.*]] = plan.alloc : memref<?x56xf32>
// CHECK-NEXT: %[[A:.*]] = plan.alloc : memref<?x56xf32>
// CHECK-NEXT: plan.launch linear ins(%[[X]], %[[GW]] : memref<?x32xf32>, memref<56x32xbf16>) outs(%[[G]] : memref<?x56xf32>)
// CHECK-NEXT: plan.launch linear ins(%[[X]], %[[UW]] : memref<?x32xf32>, memref<56x32xbf16>) outs(%[[U]] : memref<?x56xf32>)
// CHECK-NEXT: plan.launch silu_mul ins(%[[G]], %[[U]] : memref<?x56xf32>, memref<?x56xf32>) outs(%[[A]] : memref<?x56xf32>)
// CHECK-NEXT: %[[Y:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch linear ins(%[[A]], %[[DW]] : memref<?x56xf32>, memref<32x56xbf16>) outs(%[[Y]] : memref<?x32xf32>)
// CHECK-NEXT: plan.output %[[Y]] : memref<?x32xf32>
// CHECK-NOT: moe.swiglu_mlp
module attributes {moe.config = {max_position_embeddings = 32 : i64}} {
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x32xf32> {
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %tokens, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %g = moe.weight "mlp.gate_proj.weight" : tensor<56x32xbf16>
  %u = moe.weight "mlp.up_proj.weight" : tensor<56x32xbf16>
  %d = moe.weight "mlp.down_proj.weight" : tensor<32x56xbf16>
  %y = moe.swiglu_mlp %x, %g, %u, %d : (tensor<?x32xf32>, tensor<56x32xbf16>, tensor<56x32xbf16>, tensor<32x56xbf16>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
}

// -----

// shared_expert: the SwiGLU MLP of swiglu_mlp; with sigmoid_gate, one more
// launch sigmoid_gate(x, gate weight, mlp(x)) into a fresh buffer, which is
// the op's result. Context: max_position_embeddings (128) lies between 64
// and 4096.
// CHECK: plan.max_context = 128 : i64
// CTX: plan.max_context = 64 : i64
// CHECK-LABEL: func.func @main()
// CHECK: %[[X:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch embedding
// CHECK-NEXT: plan.weight "shared.gate_proj.weight" : memref<24x32xbf16>
// CHECK-NEXT: plan.weight "shared.up_proj.weight" : memref<24x32xbf16>
// CHECK-NEXT: %[[DW:.*]] = plan.weight "shared.down_proj.weight" : memref<32x24xbf16>
// CHECK-NEXT: %[[SW:.*]] = plan.weight "shared_expert_gate.weight" : memref<1x32xbf16>
// CHECK-NEXT: plan.alloc : memref<?x24xf32>
// CHECK-NEXT: plan.alloc : memref<?x24xf32>
// CHECK-NEXT: %[[A:.*]] = plan.alloc : memref<?x24xf32>
// CHECK-NEXT: plan.launch linear
// CHECK-NEXT: plan.launch linear
// CHECK-NEXT: plan.launch silu_mul
// CHECK-NEXT: %[[M:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch linear ins(%[[A]], %[[DW]] : memref<?x24xf32>, memref<32x24xbf16>) outs(%[[M]] : memref<?x32xf32>)
// CHECK-NEXT: %[[S:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch sigmoid_gate ins(%[[X]], %[[SW]], %[[M]] : memref<?x32xf32>, memref<1x32xbf16>, memref<?x32xf32>) outs(%[[S]] : memref<?x32xf32>){{$}}
// Without a gate: no sigmoid_gate launch; the down linear's buffer is the result.
// CHECK-NEXT: plan.alloc : memref<?x24xf32>
// CHECK-NEXT: plan.alloc : memref<?x24xf32>
// CHECK-NEXT: plan.alloc : memref<?x24xf32>
// CHECK-NEXT: plan.launch linear ins(%[[S]],
// CHECK-NEXT: plan.launch linear ins(%[[S]],
// CHECK-NEXT: plan.launch silu_mul
// CHECK-NEXT: %[[T:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch linear ins(%{{.*}}, %[[DW]] : memref<?x24xf32>, memref<32x24xbf16>) outs(%[[T]] : memref<?x32xf32>)
// CHECK-NEXT: plan.output %[[T]] : memref<?x32xf32>
// CHECK-NOT: sigmoid_gate
module attributes {moe.config = {max_position_embeddings = 128 : i64}} {
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x32xf32> {
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %tokens, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %sg = moe.weight "shared.gate_proj.weight" : tensor<24x32xbf16>
  %su = moe.weight "shared.up_proj.weight" : tensor<24x32xbf16>
  %sd = moe.weight "shared.down_proj.weight" : tensor<32x24xbf16>
  %sgate = moe.weight "shared_expert_gate.weight" : tensor<1x32xbf16>
  %s = moe.shared_expert %x, %sg, %su, %sd sigmoid_gate %sgate : (tensor<?x32xf32>, tensor<24x32xbf16>, tensor<24x32xbf16>, tensor<32x24xbf16>, tensor<1x32xbf16>) -> tensor<?x32xf32>
  %t = moe.shared_expert %s, %sg, %su, %sd : (tensor<?x32xf32>, tensor<24x32xbf16>, tensor<24x32xbf16>, tensor<32x24xbf16>) -> tensor<?x32xf32>
  return %t : tensor<?x32xf32>
}
}

// -----

// router + experts: the router launch has two outputs and carries
// num_experts, top_k, scoring, method, norm_topk_prob, n_group, topk_group
// and routed_scaling_factor (defaults 1, 1, 1.0 when the moe op omits
// them); experts carries num_experts, intermediate, fused_gate_up and grouped.
// CHECK: plan.max_context = 4096 : i64
// CTX: plan.max_context = 64 : i64
// CHECK-LABEL: func.func @main()
// CHECK: %[[X:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch embedding
// CHECK-NEXT: %[[GW:.*]] = plan.weight "mlp.gate.weight" : memref<8x32xbf16>
// CHECK-NEXT: %[[B:.*]] = plan.weight "mlp.gate.e_score_correction_bias" : memref<8xf32>
// CHECK-NEXT: %[[RW:.*]] = plan.alloc : memref<?x2xf32>
// CHECK-NEXT: %[[RI:.*]] = plan.alloc : memref<?x2xi32>
// CHECK-NEXT: plan.launch router ins(%[[X]], %[[GW]], %[[B]] : memref<?x32xf32>, memref<8x32xbf16>, memref<8xf32>) outs(%[[RW]], %[[RI]] : memref<?x2xf32>, memref<?x2xi32>) params #plan.router<num_experts = 8, top_k = 2, scoring = sigmoid, method = noaux_tc, norm_topk_prob = true, n_group = 4, topk_group = 2, routed_scaling_factor = 2.500000e+00 : f32, layer = -1>
// CHECK-NEXT: %[[EG:.*]] = plan.weight "mlp.experts.{e}.gate_proj.weight" : memref<8x16x32xbf16>
// CHECK-NEXT: %[[EU:.*]] = plan.weight "mlp.experts.{e}.up_proj.weight" : memref<8x16x32xbf16>
// CHECK-NEXT: %[[ED:.*]] = plan.weight "mlp.experts.{e}.down_proj.weight" : memref<8x32x16xbf16>
// CHECK-NEXT: %[[E:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch experts ins(%[[X]], %[[RW]], %[[RI]], %[[EG]], %[[EU]], %[[ED]] : memref<?x32xf32>, memref<?x2xf32>, memref<?x2xi32>, memref<8x16x32xbf16>, memref<8x16x32xbf16>, memref<8x32x16xbf16>) outs(%[[E]] : memref<?x32xf32>) params #plan.experts<num_experts = 8, intermediate = 16, fused_gate_up = false, num_shared = 0, grouped = false>
// CHECK-NEXT: %[[SW:.*]] = plan.alloc : memref<?x3xf32>
// CHECK-NEXT: %[[SI:.*]] = plan.alloc : memref<?x3xi32>
// CHECK-NEXT: plan.launch router ins(%[[E]], %[[GW]] : memref<?x32xf32>, memref<8x32xbf16>) outs(%[[SW]], %[[SI]] : memref<?x3xf32>, memref<?x3xi32>) params #plan.router<num_experts = 8, top_k = 3, scoring = softmax, method = greedy, norm_topk_prob = false, n_group = 1, topk_group = 1, routed_scaling_factor = 1.000000e+00 : f32, layer = -1>
// CHECK-NEXT: %[[GU:.*]] = plan.weight "mlp.experts.gate_up_proj" : memref<8x32x32xbf16>
// CHECK-NEXT: %[[F:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch experts ins(%[[E]], %[[SW]], %[[SI]], %[[GU]], %[[ED]] : memref<?x32xf32>, memref<?x3xf32>, memref<?x3xi32>, memref<8x32x32xbf16>, memref<8x32x16xbf16>) outs(%[[F]] : memref<?x32xf32>) params #plan.experts<num_experts = 8, intermediate = 16, fused_gate_up = true, num_shared = 0, grouped = true>
// CHECK-NEXT: plan.output %[[F]] : memref<?x32xf32>
module {
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x32xf32> {
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %tokens, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %g = moe.weight "mlp.gate.weight" : tensor<8x32xbf16>
  %b = moe.weight "mlp.gate.e_score_correction_bias" : tensor<8xf32>
  %rw, %ri = moe.router %x, %g bias %b sigmoid noaux_tc top_k 2 norm true {n_group = 4 : i64, topk_group = 2 : i64, routed_scaling_factor = 2.5 : f64} : (tensor<?x32xf32>, tensor<8x32xbf16>, tensor<8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<8x16x32xbf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" : tensor<8x16x32xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<8x32x16xbf16>
  %e = moe.experts %x routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<8x16x32xbf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<?x32xf32>
  %sw, %si = moe.router %e, %g softmax greedy top_k 3 norm false : (tensor<?x32xf32>, tensor<8x32xbf16>) -> (tensor<?x3xf32>, tensor<?x3xi32>)
  %egu = moe.weight "mlp.experts.gate_up_proj" : tensor<8x32x32xbf16>
  %f = moe.experts %e routed(%sw, %si) weights(%egu, %ed) {grouped} : (tensor<?x32xf32>, tensor<?x3xf32>, tensor<?x3xi32>, tensor<8x32x32xbf16>, tensor<8x32x16xbf16>) -> tensor<?x32xf32>
  return %f : tensor<?x32xf32>
}
}

// -----

// attention: each layer declares a gqa KV cache of kv_heads * head_dim = 16
// floats per token for keys and values, at the start of @main (each new one
// goes first, so layer 1 precedes layer 0). RoPE for theta 10000 and
// head_dim 8: inv_freq = 10000^(-2i/8) = 1, 0.1, 0.01, 0.001; linear scaling
// (factor 2) halves them. scale = 1/sqrt(8).
// CHECK: plan.max_context = 32 : i64
// CTX: plan.max_context = 32 : i64
// CHECK-LABEL: func.func @main()
// CHECK-NEXT: %[[KV1:.*]] = plan.kv_cache 1 gqa k_width 16 v_width 16 : !plan.kv_cache
// CHECK-NEXT: %[[KV0:.*]] = plan.kv_cache 0 gqa k_width 16 v_width 16 : !plan.kv_cache
// CHECK-NEXT: plan.input 0 : memref<?xi32>
// CHECK-NEXT: %[[POS:.*]] = plan.input 1 : memref<?xi32>
// CHECK: plan.weight "q.weight"
// CHECK-NEXT: %[[Q:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch linear {{.*}} outs(%[[Q]]
// CHECK-NEXT: plan.weight "k.weight"
// CHECK-NEXT: %[[K:.*]] = plan.alloc : memref<?x16xf32>
// CHECK-NEXT: plan.launch linear {{.*}} outs(%[[K]]
// CHECK-NEXT: plan.weight "v.weight"
// CHECK-NEXT: %[[V:.*]] = plan.alloc : memref<?x16xf32>
// CHECK-NEXT: plan.launch linear {{.*}} outs(%[[V]]
// CHECK-NEXT: %[[A:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch attention ins(%[[Q]], %[[K]], %[[V]], %[[POS]] : memref<?x32xf32>, memref<?x16xf32>, memref<?x16xf32>, memref<?xi32>) outs(%[[A]] : memref<?x32xf32>) kv %[[KV0]] params #plan.attention<layer = 0, num_heads = 4, num_kv_heads = 2, head_dim = 8, scale = 0.353553385 : f32, rope = <inv_freq = [1.000000e+00, 1.000000e-01, 1.000000e-02, 1.000000e-03], attention_factor = 1.000000e+00 : f32, interleaved = false>, sliding_window = 0, qk_norm_eps = 9.99999997E-7 : f32>
// CHECK-NEXT: %[[QN:.*]] = plan.weight "q_norm.weight" : memref<8xbf16>
// CHECK-NEXT: %[[KN:.*]] = plan.weight "k_norm.weight" : memref<8xbf16>
// CHECK-NEXT: %[[B:.*]] = plan.alloc : memref<?x32xf32>
// CHECK-NEXT: plan.launch attention ins(%[[A]], %[[K]], %[[V]], %[[POS]], %[[QN]], %[[KN]] : memref<?x32xf32>, memref<?x16xf32>, memref<?x16xf32>, memref<?xi32>, memref<8xbf16>, memref<8xbf16>) outs(%[[B]] : memref<?x32xf32>) kv %[[KV1]] params #plan.attention<layer = 1, num_heads = 4, num_kv_heads = 2, head_dim = 8, scale = 0.353553385 : f32, rope = <inv_freq = [5.000000e-01, 5.000000e-02, 5.000000e-03, 5.000000e-04], attention_factor = 1.000000e+00 : f32, interleaved = false>, sliding_window = 16, qk_norm_eps = 9.99999997E-7 : f32>
// CHECK-NEXT: plan.output %[[B]] : memref<?x32xf32>
module attributes {moe.config = {max_position_embeddings = 32 : i64}} {
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x32xf32> {
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %tokens, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %qw = moe.weight "q.weight" : tensor<32x32xbf16>
  %q = moe.linear %x, %qw : (tensor<?x32xf32>, tensor<32x32xbf16>) -> tensor<?x32xf32>
  %kw = moe.weight "k.weight" : tensor<16x32xbf16>
  %k = moe.linear %x, %kw : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
  %vw = moe.weight "v.weight" : tensor<16x32xbf16>
  %v = moe.linear %x, %vw : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
  %a = moe.attention %q, %k, %v positions %positions layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  %qn = moe.weight "q_norm.weight" : tensor<8xbf16>
  %kn = moe.weight "k_norm.weight" : tensor<8xbf16>
  %b = moe.attention %a, %k, %v positions %positions qk_norm(%qn, %kn) layer 1 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64, sliding_window = 16 : i64, rope_scaling = {rope_type = "linear", factor = 2.0 : f64}} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<?x32xf32>
  return %b : tensor<?x32xf32>
}
}

// -----

// mla_attention: an mla KV cache with k_width = kv_lora_rank (16) and
// v_width = qk_rope_head_dim (4); RoPE over the 4 rope dims (inv_freq 1,
// 0.01), interleaved; the moe op's softmax_scale becomes scale.
// CHECK: plan.max_context = 4096 : i64
// CTX: plan.max_context = 64 : i64
// CHECK-LABEL: func.func @main()
// CHECK-NEXT: %[[KV:.*]] = plan.kv_cache 3 mla k_width 16 v_width 4 : !plan.kv_cache
// CHECK-NEXT: plan.input 0 : memref<?xi32>
// CHECK-NEXT: %[[POS:.*]] = plan.input 1 : memref<?xi32>
// CHECK: %[[Q:.*]] = plan.alloc : memref<?x48xf32>
// CHECK: %[[KVA:.*]] = plan.alloc : memref<?x20xf32>
// CHECK-NEXT: plan.launch linear
// CHECK-NEXT: %[[KVN:.*]] = plan.weight "kv_a_layernorm.weight" : memref<16xbf16>
// CHECK-NEXT: %[[KVB:.*]] = plan.weight "kv_b.weight" : memref<56x16xbf16>
// CHECK-NEXT: %[[A:.*]] = plan.alloc : memref<?x24xf32>
// CHECK-NEXT: plan.launch mla_attention ins(%[[Q]], %[[KVA]], %[[KVN]], %[[KVB]], %[[POS]] : memref<?x48xf32>, memref<?x20xf32>, memref<16xbf16>, memref<56x16xbf16>, memref<?xi32>) outs(%[[A]] : memref<?x24xf32>) kv %[[KV]] params #plan.mla<layer = 3, num_heads = 4, kv_lora_rank = 16, qk_nope_head_dim = 8, qk_rope_head_dim = 4, v_head_dim = 6, scale = 2.500000e-01 : f32, rope = <inv_freq = [1.000000e+00, 1.000000e-02], attention_factor = 1.000000e+00 : f32, interleaved = true>, norm_eps = 9.99999997E-7 : f32>
// CHECK-NEXT: plan.output %[[A]] : memref<?x24xf32>
module {
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x24xf32> {
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %tokens, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %qw = moe.weight "q.weight" : tensor<48x32xbf16>
  %q = moe.linear %x, %qw : (tensor<?x32xf32>, tensor<48x32xbf16>) -> tensor<?x48xf32>
  %kvw = moe.weight "kv_a.weight" : tensor<20x32xbf16>
  %kva = moe.linear %x, %kvw : (tensor<?x32xf32>, tensor<20x32xbf16>) -> tensor<?x20xf32>
  %kvn = moe.weight "kv_a_layernorm.weight" : tensor<16xbf16>
  %kvb = moe.weight "kv_b.weight" : tensor<56x16xbf16>
  %a = moe.mla_attention %q, %kva, %kvn, %kvb positions %positions layer 3 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return %a : tensor<?x24xf32>
}
}
