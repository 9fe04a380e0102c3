// moe-fuse-experts on one MoE block per family: gate and up stacks joined by
// `concat`, residual add + RMSNorm fused; routers, shared experts and
// already-fused or block-scaled stacks left as they are.
// RUN: moe-opt %s -split-input-file --moe-fuse-experts | FileCheck %s

// Mixtral: softmax top-2 router, w1/w3/w2 experts.
// CHECK-LABEL: func.func @mixtral
func.func @mixtral(%x: tensor<?x32xf32>, %attn: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // CHECK: %[[NW:.*]] = moe.weight "post_attention_layernorm.weight"
  // CHECK: %[[SUM:.*]], %[[NORMED:.*]] = moe.add_rms_norm %arg0, %arg1, %[[NW]] eps 1.000000e-05 : (tensor<?x32xf32>, tensor<?x32xf32>, tensor<32xbf16>) -> (tensor<?x32xf32>, tensor<?x32xf32>)
  // CHECK-NOT: moe.add
  // CHECK-NOT: moe.rms_norm
  %h = moe.add %x, %attn : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %nw = moe.weight "post_attention_layernorm.weight" : tensor<32xbf16>
  %n = moe.rms_norm %h, %nw eps 1.0e-5 : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  // CHECK: %[[W:.*]], %[[I:.*]] = moe.router %[[NORMED]], %{{.*}} softmax greedy top_k 2 norm true
  %g = moe.weight "block_sparse_moe.gate.weight" : tensor<8x32xbf16>
  %rw, %ri = moe.router %n, %g softmax greedy top_k 2 norm true : (tensor<?x32xf32>, tensor<8x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // CHECK-DAG: %[[DOWN:.*]] = moe.weight "block_sparse_moe.experts.{e}.w2.weight" : tensor<8x32x48xbf16>
  // CHECK-DAG: %[[GU:.*]] = moe.weight "block_sparse_moe.experts.{e}.w1.weight" concat ["block_sparse_moe.experts.{e}.w3.weight"] : tensor<8x96x32xbf16>
  %w1 = moe.weight "block_sparse_moe.experts.{e}.w1.weight" : tensor<8x48x32xbf16>
  %w3 = moe.weight "block_sparse_moe.experts.{e}.w3.weight" : tensor<8x48x32xbf16>
  %w2 = moe.weight "block_sparse_moe.experts.{e}.w2.weight" : tensor<8x32x48xbf16>
  // CHECK: %[[Y:.*]] = moe.experts %[[NORMED]] routed(%[[W]], %[[I]]) weights(%[[GU]], %[[DOWN]]) {grouped} : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<8x96x32xbf16>, tensor<8x32x48xbf16>) -> tensor<?x32xf32>
  %e = moe.experts %n routed(%rw, %ri) weights(%w1, %w3, %w2) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<8x48x32xbf16>, tensor<8x48x32xbf16>, tensor<8x32x48xbf16>) -> tensor<?x32xf32>
  // CHECK: moe.add %[[SUM]], %[[Y]]
  %out = moe.add %h, %e : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %out : tensor<?x32xf32>
}

// -----

// Qwen2-MoE: routed experts fused; the shared expert with its sigmoid gate
// stays a moe.shared_expert (its intermediate size differs from the routed
// experts', and its gate is per token).
// CHECK-LABEL: func.func @qwen2_moe
func.func @qwen2_moe(%x: tensor<?x32xf32>, %attn: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // CHECK: %[[SUM:.*]], %[[NORMED:.*]] = moe.add_rms_norm %arg0, %arg1
  %h = moe.add %x, %attn : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %nw = moe.weight "post_attention_layernorm.weight" : tensor<32xbf16>
  %n = moe.rms_norm %h, %nw eps 1.0e-6 : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  %g = moe.weight "mlp.gate.weight" : tensor<6x32xbf16>
  %rw, %ri = moe.router %n, %g softmax greedy top_k 2 norm false : (tensor<?x32xf32>, tensor<6x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // CHECK-DAG: %[[GU:.*]] = moe.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] : tensor<6x48x32xbf16>
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<6x24x32xbf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" : tensor<6x24x32xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<6x32x24xbf16>
  // CHECK: moe.experts %[[NORMED]] routed(%{{.*}}, %{{.*}}) weights(%[[GU]], %{{.*}}) {grouped} : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x48x32xbf16>, tensor<6x32x24xbf16>) -> tensor<?x32xf32>
  %r = moe.experts %n routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x24x32xbf16>, tensor<6x24x32xbf16>, tensor<6x32x24xbf16>) -> tensor<?x32xf32>
  // CHECK: moe.shared_expert %[[NORMED]], %{{.*}}, %{{.*}}, %{{.*}} sigmoid_gate %{{.*}} : (tensor<?x32xf32>, tensor<56x32xbf16>, tensor<56x32xbf16>, tensor<32x56xbf16>, tensor<1x32xbf16>) -> tensor<?x32xf32>
  %sg = moe.weight "mlp.shared_expert.gate_proj.weight" : tensor<56x32xbf16>
  %su = moe.weight "mlp.shared_expert.up_proj.weight" : tensor<56x32xbf16>
  %sd = moe.weight "mlp.shared_expert.down_proj.weight" : tensor<32x56xbf16>
  %sgate = moe.weight "mlp.shared_expert_gate.weight" : tensor<1x32xbf16>
  %s = moe.shared_expert %n, %sg, %su, %sd sigmoid_gate %sgate : (tensor<?x32xf32>, tensor<56x32xbf16>, tensor<56x32xbf16>, tensor<32x56xbf16>, tensor<1x32xbf16>) -> tensor<?x32xf32>
  %m = moe.add %r, %s : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %out = moe.add %h, %m : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %out : tensor<?x32xf32>
}

// -----

// DeepSeek-V3: sigmoid noaux_tc router with correction bias, group limits
// and scaling stays one op; routed experts fused; the shared expert (ungated,
// the routed experts' size) folded in as a ninth, always-on expert.
// CHECK-LABEL: func.func @deepseek_v3
func.func @deepseek_v3(%x: tensor<?x32xf32>, %attn: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // CHECK: %[[SUM:.*]], %[[NORMED:.*]] = moe.add_rms_norm %arg0, %arg1, %{{.*}} eps 9.9999999999999995E-7
  %h = moe.add %x, %attn : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %nw = moe.weight "post_attention_layernorm.weight" : tensor<32xbf16>
  %n = moe.rms_norm %h, %nw eps 1.0e-6 : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  %g = moe.weight "mlp.gate.weight" : tensor<8x32xbf16>
  %b = moe.weight "mlp.gate.e_score_correction_bias" : tensor<8xf32>
  // CHECK: moe.router %[[NORMED]], %{{.*}} bias %{{.*}} sigmoid noaux_tc top_k 2 norm true {n_group = 4 : i64, routed_scaling_factor = 2.500000e+00 : f64, topk_group = 2 : i64}
  %rw, %ri = moe.router %n, %g bias %b sigmoid noaux_tc top_k 2 norm true {n_group = 4 : i64, topk_group = 2 : i64, routed_scaling_factor = 2.5 : f64} : (tensor<?x32xf32>, tensor<8x32xbf16>, tensor<8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // CHECK-DAG: %[[GU:.*]] = moe.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] append ["mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"] : tensor<9x32x32xbf16>
  // CHECK-DAG: %[[DOWN:.*]] = moe.weight "mlp.experts.{e}.down_proj.weight" append ["mlp.shared_experts.down_proj.weight"] : tensor<9x32x16xbf16>
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<8x16x32xbf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" : tensor<8x16x32xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<8x32x16xbf16>
  // CHECK: %[[Y:.*]] = moe.experts %[[NORMED]] routed(%{{.*}}, %{{.*}}) weights(%[[GU]], %[[DOWN]]) {grouped, shared = 1 : i64} : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<9x32x32xbf16>, tensor<9x32x16xbf16>) -> tensor<?x32xf32>
  // CHECK-NOT: moe.shared_expert
  // CHECK: moe.add %[[SUM]], %[[Y]]
  %r = moe.experts %n routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<8x16x32xbf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<?x32xf32>
  %sg = moe.weight "mlp.shared_experts.gate_proj.weight" : tensor<16x32xbf16>
  %su = moe.weight "mlp.shared_experts.up_proj.weight" : tensor<16x32xbf16>
  %sd = moe.weight "mlp.shared_experts.down_proj.weight" : tensor<32x16xbf16>
  %s = moe.shared_expert %n, %sg, %su, %sd : (tensor<?x32xf32>, tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<32x16xbf16>) -> tensor<?x32xf32>
  %m = moe.add %r, %s : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %out = moe.add %h, %m : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %out : tensor<?x32xf32>
}

// -----

// DeepSeek-V2-Lite keeps two shared experts as one of twice the routed
// size: not foldable into the routed stacks (left as a shared expert).
// CHECK-LABEL: func.func @shared_of_another_size
func.func @shared_of_another_size(%n: tensor<?x32xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>) -> tensor<?x32xf32> {
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<8x16x32xbf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" : tensor<8x16x32xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<8x32x16xbf16>
  // CHECK: moe.experts {{.*}} -> tensor<?x32xf32>
  // CHECK-NOT: shared = 1
  %r = moe.experts %n routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<8x16x32xbf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<?x32xf32>
  // CHECK: moe.shared_expert
  %sg = moe.weight "mlp.shared_experts.gate_proj.weight" : tensor<32x32xbf16>
  %su = moe.weight "mlp.shared_experts.up_proj.weight" : tensor<32x32xbf16>
  %sd = moe.weight "mlp.shared_experts.down_proj.weight" : tensor<32x32xbf16>
  %s = moe.shared_expert %n, %sg, %su, %sd : (tensor<?x32xf32>, tensor<32x32xbf16>, tensor<32x32xbf16>, tensor<32x32xbf16>) -> tensor<?x32xf32>
  %m = moe.add %r, %s : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %m : tensor<?x32xf32>
}

// -----

// Left alone (only grouped): a stack already fused (transformers v5
// gate_up_proj), stacks stored whole rather than per expert, block-scaled
// fp8 stacks, and a norm whose input is not an add.
// CHECK-LABEL: func.func @unchanged
func.func @unchanged(%n: tensor<?x32xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>) -> tensor<?x32xf32> {
  // CHECK: moe.rms_norm %arg0
  %nw = moe.weight "norm.weight" : tensor<32xbf16>
  %n2 = moe.rms_norm %n, %nw eps 1.0e-6 : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  // CHECK: %[[GU:.*]] = moe.weight "mlp.experts.gate_up_proj" : tensor<6x48x32xbf16>
  // CHECK: moe.experts %{{.*}} weights(%[[GU]], %{{.*}})
  %gu = moe.weight "mlp.experts.gate_up_proj" : tensor<6x48x32xbf16>
  %d = moe.weight "mlp.experts.down_proj" : tensor<6x32x24xbf16>
  %a = moe.experts %n2 routed(%rw, %ri) weights(%gu, %d) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x48x32xbf16>, tensor<6x32x24xbf16>) -> tensor<?x32xf32>
  // CHECK: %[[G:.*]] = moe.weight "mlp.experts.gate_proj" : tensor<6x24x32xbf16>
  // CHECK: %[[U:.*]] = moe.weight "mlp.experts.up_proj" : tensor<6x24x32xbf16>
  // CHECK: moe.experts %{{.*}} weights(%[[G]], %[[U]], %{{.*}})
  %g = moe.weight "mlp.experts.gate_proj" : tensor<6x24x32xbf16>
  %u = moe.weight "mlp.experts.up_proj" : tensor<6x24x32xbf16>
  %b = moe.experts %n2 routed(%rw, %ri) weights(%g, %u, %d) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x24x32xbf16>, tensor<6x24x32xbf16>, tensor<6x32x24xbf16>) -> tensor<?x32xf32>
  // CHECK: moe.weight "mlp.experts.{e}.gate_proj.weight" scale
  // CHECK: moe.experts %{{.*}} weights(%{{.*}}, %{{.*}}, %{{.*}}) {grouped}
  %fg = moe.weight "mlp.experts.{e}.gate_proj.weight" scale "mlp.experts.{e}.gate_proj.weight_scale_inv" block [128, 128] : tensor<6x24x32xf8E4M3FN>
  %fu = moe.weight "mlp.experts.{e}.up_proj.weight" scale "mlp.experts.{e}.up_proj.weight_scale_inv" block [128, 128] : tensor<6x24x32xf8E4M3FN>
  %fd = moe.weight "mlp.experts.{e}.down_proj.weight" scale "mlp.experts.{e}.down_proj.weight_scale_inv" block [128, 128] : tensor<6x32x24xf8E4M3FN>
  %c = moe.experts %n2 routed(%rw, %ri) weights(%fg, %fu, %fd) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<6x24x32xf8E4M3FN>, tensor<6x24x32xf8E4M3FN>, tensor<6x32x24xf8E4M3FN>) -> tensor<?x32xf32>
  %s = moe.add %a, %b : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %t = moe.add %s, %c : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %t : tensor<?x32xf32>
}

// -----

// Layouts (moe-assign-precision{weight-layout}): gate and up in panels fuse
// into a gate_up in panels, and an ungated shared expert in panels folds
// into the panel stacks; a gate in panels and an up in rows stay apart, as
// does a shared expert whose layout differs from the stacks'.
// CHECK-LABEL: func.func @layouts
func.func @layouts(%n: tensor<?x32xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  // CHECK-DAG: %[[GU:.*]] = moe.weight "a.experts.{e}.gate_proj.weight" concat ["a.experts.{e}.up_proj.weight"] append ["a.shared_experts.gate_proj.weight", "a.shared_experts.up_proj.weight"] panels : tensor<9x32x32xbf16>
  // CHECK-DAG: %[[DOWN:.*]] = moe.weight "a.experts.{e}.down_proj.weight" append ["a.shared_experts.down_proj.weight"] panels : tensor<9x32x16xbf16>
  // CHECK: moe.experts %arg0 routed(%arg1, %arg2) weights(%[[GU]], %[[DOWN]]) {grouped, shared = 1 : i64}
  %eg = moe.weight "a.experts.{e}.gate_proj.weight" panels : tensor<8x16x32xbf16>
  %eu = moe.weight "a.experts.{e}.up_proj.weight" panels : tensor<8x16x32xbf16>
  %ed = moe.weight "a.experts.{e}.down_proj.weight" panels : tensor<8x32x16xbf16>
  %r = moe.experts %n routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<8x16x32xbf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<?x32xf32>
  %sg = moe.weight "a.shared_experts.gate_proj.weight" panels : tensor<16x32xbf16>
  %su = moe.weight "a.shared_experts.up_proj.weight" panels : tensor<16x32xbf16>
  %sd = moe.weight "a.shared_experts.down_proj.weight" panels : tensor<32x16xbf16>
  %s = moe.shared_expert %n, %sg, %su, %sd : (tensor<?x32xf32>, tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<32x16xbf16>) -> tensor<?x32xf32>
  %m = moe.add %r, %s : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  // CHECK: %[[G:.*]] = moe.weight "b.experts.{e}.gate_proj.weight" panels : tensor<8x16x32xbf16>
  // CHECK: %[[U:.*]] = moe.weight "b.experts.{e}.up_proj.weight" : tensor<8x16x32xbf16>
  // CHECK: moe.experts %arg0 routed(%arg1, %arg2) weights(%[[G]], %[[U]], %{{.*}}) {grouped}
  // CHECK: moe.shared_expert
  %bg = moe.weight "b.experts.{e}.gate_proj.weight" panels : tensor<8x16x32xbf16>
  %bu = moe.weight "b.experts.{e}.up_proj.weight" : tensor<8x16x32xbf16>
  %bd = moe.weight "b.experts.{e}.down_proj.weight" panels : tensor<8x32x16xbf16>
  %b = moe.experts %n routed(%rw, %ri) weights(%bg, %bu, %bd) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<8x16x32xbf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<?x32xf32>
  %cg = moe.weight "b.shared_experts.gate_proj.weight" : tensor<16x32xbf16>
  %cu = moe.weight "b.shared_experts.up_proj.weight" : tensor<16x32xbf16>
  %cd = moe.weight "b.shared_experts.down_proj.weight" : tensor<32x16xbf16>
  %c = moe.shared_expert %n, %cg, %cu, %cd : (tensor<?x32xf32>, tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<32x16xbf16>) -> tensor<?x32xf32>
  %bm = moe.add %b, %c : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %m, %bm : tensor<?x32xf32>, tensor<?x32xf32>
}
