// Every moe op parses, verifies and prints back to a form that parses again.
// RUN: moe-opt %s | moe-opt | FileCheck %s

// CHECK: module attributes {moe.config = {hidden_size = 32 : i64}, moe.model_type = "qwen2_moe"}
module attributes {moe.model_type = "qwen2_moe", moe.config = {hidden_size = 32 : i64}} {
// CHECK-LABEL: func.func @gqa_layer
func.func @gqa_layer(%tokens: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x96xf32> {
  // CHECK: moe.weight "model.embed_tokens.weight" : tensor<96x32xbf16>
  %emb = moe.weight "model.embed_tokens.weight" : tensor<96x32xbf16>
  // CHECK: moe.embedding %{{.*}}, %{{.*}} : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %h = moe.embedding %tokens, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %nw = moe.weight "model.layers.0.input_layernorm.weight" : tensor<32xbf16>
  // CHECK: moe.rms_norm %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 :
  %x = moe.rms_norm %h, %nw eps 1.0e-6 : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  %qw = moe.weight "q.weight" : tensor<32x32xbf16>
  %qb = moe.weight "q.bias" : tensor<32xbf16>
  // CHECK: moe.weight "k.weight" precision bf16 panels : tensor<16x32xf32>
  %pw = moe.weight "k.weight" precision bf16 panels : tensor<16x32xf32>
  // CHECK: moe.weight "v.weight" precision int4 group 16 stored : tensor<16x32xf16>
  %sw = moe.weight "v.weight" precision int4 group 16 stored : tensor<16x32xf16>
  // CHECK: moe.linear %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<?x32xf32>, tensor<32x32xbf16>, tensor<32xbf16>) -> tensor<?x32xf32>
  %q = moe.linear %x, %qw bias %qb : (tensor<?x32xf32>, tensor<32x32xbf16>, tensor<32xbf16>) -> tensor<?x32xf32>
  %kw = moe.weight "k.weight" : tensor<16x32xbf16>
  // CHECK: moe.linear %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
  %k = moe.linear %x, %kw : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
  %v = moe.linear %x, %kw : (tensor<?x32xf32>, tensor<16x32xbf16>) -> tensor<?x16xf32>
  %qn = moe.weight "q_norm.weight" : tensor<8xbf16>
  %kn = moe.weight "k_norm.weight" : tensor<8xbf16>
  // CHECK: moe.attention %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} qk_norm(%{{.*}}, %{{.*}}) layer 0 heads 4 kv_heads 2 head_dim 8 {rope_scaling = {factor = 2.000000e+00 : f64, rope_type = "linear"}, rope_theta = 1.000000e+06 : f64, sliding_window = 64 : i64}
  %a = moe.attention %q, %k, %v positions %pos qk_norm(%qn, %kn) layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e6 : f64, sliding_window = 64 : i64, rope_scaling = {rope_type = "linear", factor = 2.0 : f64}} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<?x32xf32>
  // CHECK: moe.add %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %h1 = moe.add %h, %a : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %g = moe.weight "mlp.gate.weight" : tensor<6x32xbf16>
  // CHECK: %weights, %indices = moe.router %{{.*}}, %{{.*}} softmax greedy top_k 2 norm false : (tensor<?x32xf32>, tensor<6x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %rw, %ri = moe.router %h1, %g softmax greedy top_k 2 norm false : (tensor<?x32xf32>, tensor<6x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // CHECK: moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<6x24x32xbf16>
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<6x24x32xbf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" : tensor<6x24x32xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<6x32x24xbf16>
  // CHECK: moe.experts %{{.*}} routed(%{{.*}}, %{{.*}}) weights(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x24x32xbf16>, tensor<6x24x32xbf16>, tensor<6x32x24xbf16>) -> tensor<?x32xf32>
  %r = moe.experts %h1 routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x24x32xbf16>, tensor<6x24x32xbf16>, tensor<6x32x24xbf16>) -> tensor<?x32xf32>
  %egu = moe.weight "mlp.experts.gate_up_proj" : tensor<6x48x32xbf16>
  // CHECK: moe.experts %{{.*}} routed(%{{.*}}, %{{.*}}) weights(%{{.*}}, %{{.*}}) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x48x32xbf16>, tensor<6x32x24xbf16>) -> tensor<?x32xf32>
  %rf = moe.experts %h1 routed(%rw, %ri) weights(%egu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x48x32xbf16>, tensor<6x32x24xbf16>) -> tensor<?x32xf32>
  %sg = moe.weight "shared.gate_proj.weight" : tensor<56x32xbf16>
  %su = moe.weight "shared.up_proj.weight" : tensor<56x32xbf16>
  %sd = moe.weight "shared.down_proj.weight" : tensor<32x56xbf16>
  %sgate = moe.weight "shared_expert_gate.weight" : tensor<1x32xbf16>
  // CHECK: moe.shared_expert %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} sigmoid_gate %{{.*}} :
  %s = moe.shared_expert %h1, %sg, %su, %sd sigmoid_gate %sgate : (tensor<?x32xf32>, tensor<56x32xbf16>, tensor<56x32xbf16>, tensor<32x56xbf16>, tensor<1x32xbf16>) -> tensor<?x32xf32>
  // CHECK: moe.shared_expert %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<56x32xbf16>, tensor<56x32xbf16>, tensor<32x56xbf16>) -> tensor<?x32xf32>
  %s2 = moe.shared_expert %h1, %sg, %su, %sd : (tensor<?x32xf32>, tensor<56x32xbf16>, tensor<56x32xbf16>, tensor<32x56xbf16>) -> tensor<?x32xf32>
  // CHECK: moe.swiglu_mlp %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<56x32xbf16>, tensor<56x32xbf16>, tensor<32x56xbf16>) -> tensor<?x32xf32>
  %d = moe.swiglu_mlp %h1, %sg, %su, %sd : (tensor<?x32xf32>, tensor<56x32xbf16>, tensor<56x32xbf16>, tensor<32x56xbf16>) -> tensor<?x32xf32>
  // CHECK: moe.lm_head %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<96x32xbf16>) -> tensor<?x96xf32>
  %logits = moe.lm_head %d, %emb : (tensor<?x32xf32>, tensor<96x32xbf16>) -> tensor<?x96xf32>
  return %logits : tensor<?x96xf32>
}

// CHECK-LABEL: func.func @deepseek_v3_routing_and_mla
func.func @deepseek_v3_routing_and_mla(%x: tensor<?x32xf32>, %pos: tensor<?xi64>) -> (tensor<?x24xf32>, tensor<?x8xi32>) {
  // CHECK: moe.weight "q_b.weight" scale "q_b.weight_scale_inv" block [16, 16] : tensor<48x32xf8E4M3FN>
  %qw = moe.weight "q_b.weight" scale "q_b.weight_scale_inv" block [16, 16] : tensor<48x32xf8E4M3FN>
  %q = moe.linear %x, %qw : (tensor<?x32xf32>, tensor<48x32xf8E4M3FN>) -> tensor<?x48xf32>
  %kvw = moe.weight "kv_a.weight" : tensor<20x32xbf16>
  %kva = moe.linear %x, %kvw : (tensor<?x32xf32>, tensor<20x32xbf16>) -> tensor<?x20xf32>
  %kvn = moe.weight "kv_a_layernorm.weight" : tensor<16xbf16>
  %kvb = moe.weight "kv_b.weight" : tensor<56x16xbf16>
  // CHECK: moe.mla_attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}} layer 3 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {rope_theta = 1.000000e+04 : f64, softmax_scale = 2.500000e-01 : f64}
  %a = moe.mla_attention %q, %kva, %kvn, %kvb positions %pos layer 3 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi64>) -> tensor<?x24xf32>
  %g = moe.weight "mlp.gate.weight" : tensor<256x32xbf16>
  %b = moe.weight "mlp.gate.e_score_correction_bias" : tensor<256xf32>
  // CHECK: moe.router %{{.*}}, %{{.*}} bias %{{.*}} sigmoid noaux_tc top_k 8 norm true {n_group = 8 : i64, routed_scaling_factor = 2.500000e+00 : f64, topk_group = 4 : i64}
  %rw, %ri = moe.router %x, %g bias %b sigmoid noaux_tc top_k 8 norm true {n_group = 8 : i64, topk_group = 4 : i64, routed_scaling_factor = 2.5 : f64} : (tensor<?x32xf32>, tensor<256x32xbf16>, tensor<256xf32>) -> (tensor<?x8xf32>, tensor<?x8xi32>)
  // CHECK: moe.router %{{.*}}, %{{.*}} softmax group_limited_greedy top_k 6 norm false {n_group = 8 : i64, topk_group = 3 : i64}
  %vw, %vi = moe.router %x, %g softmax group_limited_greedy top_k 6 norm false {n_group = 8 : i64, topk_group = 3 : i64} : (tensor<?x32xf32>, tensor<256x32xbf16>) -> (tensor<?x6xf32>, tensor<?x6xi32>)
  return %a, %ri : tensor<?x24xf32>, tensor<?x8xi32>
}
}
