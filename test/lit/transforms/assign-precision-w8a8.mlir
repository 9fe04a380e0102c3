// moe-assign-precision policy=w8a8: every matrix the runtime multiplies
// through linear()/linearGroup()/experts() becomes w8a8 (int8 with one
// scale per row, int8 activations); the router, the embedding table and
// MLA's kv_b get plain int8; a tied embedding/LM head takes w8a8 (its
// lookup reads the same int8 rows); vectors stay as stored. Overrides accept w8a8 where it applies
// and refuse it for the embedding table. moe-to-plan stores w8a8 as i8
// with `int8_activations`.
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=w8a8 | FileCheck %s --check-prefix=W8A8
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=w8a8 --moe-fuse-experts --moe-to-plan | FileCheck %s --check-prefix=PLAN
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=int8 overrides=experts=w8a8,router=w8a8,attention=w8a8" | FileCheck %s --check-prefix=OVER
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=w8a8 overrides=lm_head=bf16" | FileCheck %s --check-prefix=HEADBF16
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=w8a8 overrides=lm_head=fp8" | FileCheck %s --check-prefix=HEADFP8
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=int8 overrides=lm_head=w8a8" | FileCheck %s --check-prefix=INT8HEADW8A8
// RUN: not moe-opt %s -split-input-file --moe-assign-precision="policy=w8a8 overrides=embedding=w8a8" 2>&1 | FileCheck %s --check-prefix=BADEMB
// RUN: not moe-opt %s -split-input-file --moe-assign-precision="overrides=router=w8a4" 2>&1 | FileCheck %s --check-prefix=BADOVER

// BADEMB: override 'embedding=w8a8': the embedding table is looked up by row, not multiplied, so it cannot quantize activations; w8a8 applies to lm_head, router, experts, shared_expert, dense_mlp and attention
// BADOVER: override 'router=w8a4' is not <component>=<precision>: {{.*}}precisions keep, f32, bf16, int8, w8a8, fp8, int4

// DeepSeek-like: MLA attention (kv_b), a dense MLP layer, a router, routed
// experts, a shared expert, an LM head of its own.
// W8A8-LABEL: func.func @forward
// PLAN-LABEL: func.func @main
// OVER-LABEL: func.func @forward
// HEADBF16-LABEL: func.func @forward
// HEADFP8-LABEL: func.func @forward
// INT8HEADW8A8-LABEL: func.func @forward
func.func @forward(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x96xf32> {
  // W8A8: moe.weight "embed" precision int8 group 32 : tensor<96x32xbf16>
  // PLAN: plan.weight "embed" group 32 : memref<96x32xi8>
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %ids, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  // W8A8: moe.weight "q.weight" precision w8a8 group 32 : tensor<48x32xbf16>
  // PLAN: plan.weight "q.weight" group 32 int8_activations : memref<48x32xi8>
  // OVER: moe.weight "q.weight" precision w8a8 group 32 : tensor<48x32xbf16>
  %qw = moe.weight "q.weight" : tensor<48x32xbf16>
  %q = moe.linear %x, %qw : (tensor<?x32xf32>, tensor<48x32xbf16>) -> tensor<?x48xf32>
  // W8A8: moe.weight "kv_a.weight" precision w8a8 group 32 : tensor<20x32xbf16>
  %kvw = moe.weight "kv_a.weight" : tensor<20x32xbf16>
  %kva = moe.linear %x, %kvw : (tensor<?x32xf32>, tensor<20x32xbf16>) -> tensor<?x20xf32>
  // W8A8: moe.weight "kv_a_layernorm.weight" : tensor<16xbf16>
  %kvn = moe.weight "kv_a_layernorm.weight" : tensor<16xbf16>
  // kv_b is read by the MLA kernel, which does not quantize activations:
  // int8, under the policy and under attention=w8a8 alike.
  // W8A8: moe.weight "kv_b.weight" precision int8 group 16 : tensor<56x16xbf16>
  // PLAN: plan.weight "kv_b.weight" group 16 : memref<56x16xi8>
  // OVER: moe.weight "kv_b.weight" precision int8 group 16 : tensor<56x16xbf16>
  %kvb = moe.weight "kv_b.weight" : tensor<56x16xbf16>
  %a = moe.mla_attention %q, %kva, %kvn, %kvb positions %pos layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  // W8A8: moe.weight "o.weight" precision w8a8 group 24 : tensor<32x24xbf16>
  %ow = moe.weight "o.weight" : tensor<32x24xbf16>
  %o = moe.linear %a, %ow : (tensor<?x24xf32>, tensor<32x24xbf16>) -> tensor<?x32xf32>
  // The dense MLP: three linears in the plan.
  // W8A8: moe.weight "mlp.gate_proj.weight" precision w8a8 group 32 : tensor<40x32xbf16>
  // W8A8: moe.weight "mlp.down_proj.weight" precision w8a8 group 40 : tensor<32x40xbf16>
  // PLAN: plan.weight "mlp.down_proj.weight" group 40 int8_activations : memref<32x40xi8>
  // Not in the override's components: int8.
  // OVER: moe.weight "mlp.gate_proj.weight" precision int8 group 32 : tensor<40x32xbf16>
  %dg = moe.weight "mlp.gate_proj.weight" : tensor<40x32xbf16>
  %du = moe.weight "mlp.up_proj.weight" : tensor<40x32xbf16>
  %dd = moe.weight "mlp.down_proj.weight" : tensor<32x40xbf16>
  %d = moe.swiglu_mlp %o, %dg, %du, %dd : (tensor<?x32xf32>, tensor<40x32xbf16>, tensor<40x32xbf16>, tensor<32x40xbf16>) -> tensor<?x32xf32>
  // The router keeps int8 weights (f32 activations) under the policy; the
  // override may make it w8a8 (its kernel multiplies through linear()).
  // W8A8: moe.weight "mlp.gate.weight" precision int8 group 32 : tensor<4x32xbf16>
  // PLAN: plan.weight "mlp.gate.weight" group 32 : memref<4x32xi8>
  // OVER: moe.weight "mlp.gate.weight" precision w8a8 group 32 : tensor<4x32xbf16>
  %g = moe.weight "mlp.gate.weight" : tensor<4x32xbf16>
  %rw, %ri = moe.router %d, %g softmax greedy top_k 2 norm false : (tensor<?x32xf32>, tensor<4x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // W8A8: moe.weight "mlp.experts.{e}.gate_proj.weight" precision w8a8 group 32 : tensor<4x24x32xbf16>
  // W8A8: moe.weight "mlp.experts.{e}.down_proj.weight" precision w8a8 group 24 : tensor<4x32x24xbf16>
  // Fused gate_up (made after down) keeps w8a8.
  // PLAN: plan.weight "mlp.experts.{e}.down_proj.weight" group 24 int8_activations : memref<4x32x24xi8>
  // PLAN: plan.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] group 32 int8_activations : memref<4x48x32xi8>
  // OVER: moe.weight "mlp.experts.{e}.down_proj.weight" precision w8a8 group 24 : tensor<4x32x24xbf16>
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<4x24x32xbf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" : tensor<4x24x32xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<4x32x24xbf16>
  %r = moe.experts %d routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x24x32xbf16>, tensor<4x24x32xbf16>, tensor<4x32x24xbf16>) -> tensor<?x32xf32>
  // W8A8: moe.weight "mlp.shared_experts.gate_proj.weight" precision w8a8 group 32 : tensor<24x32xbf16>
  // W8A8: moe.weight "mlp.shared_expert_gate.weight" : tensor<1x32xbf16>
  // OVER: moe.weight "mlp.shared_experts.gate_proj.weight" precision int8 group 32 : tensor<24x32xbf16>
  %sg = moe.weight "mlp.shared_experts.gate_proj.weight" : tensor<24x32xbf16>
  %su = moe.weight "mlp.shared_experts.up_proj.weight" : tensor<24x32xbf16>
  %sd = moe.weight "mlp.shared_experts.down_proj.weight" : tensor<32x24xbf16>
  %sgate = moe.weight "mlp.shared_expert_gate.weight" : tensor<1x32xbf16>
  %s = moe.shared_expert %d, %sg, %su, %sd sigmoid_gate %sgate : (tensor<?x32xf32>, tensor<24x32xbf16>, tensor<24x32xbf16>, tensor<32x24xbf16>, tensor<1x32xbf16>) -> tensor<?x32xf32>
  %m = moe.add %r, %s : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  // W8A8: moe.weight "lm_head.weight" precision w8a8 group 32 : tensor<96x32xbf16>
  // PLAN: plan.weight "lm_head.weight" group 32 int8_activations : memref<96x32xi8>
  // OVER: moe.weight "lm_head.weight" precision int8 group 32 : tensor<96x32xbf16>
  %hw = moe.weight "lm_head.weight" : tensor<96x32xbf16>
  %logits = moe.lm_head %m, %hw : (tensor<?x32xf32>, tensor<96x32xbf16>) -> tensor<?x96xf32>
  return %logits : tensor<?x96xf32>
}

// -----

// A tied embedding/LM head takes the LM head's w8a8: the lookup reads the
// same int8 rows times their scales, under the w8a8 policy or an lm_head
// override of the int8 policy. With the LM head int8 (the int8 policy),
// bf16 (more precise than the lookup's int8) or fp8 (less precise: the
// lookup's int8 wins), the table takes the more precise.
// W8A8-LABEL: func.func @forward
// PLAN-LABEL: func.func @main
// OVER-LABEL: func.func @forward
// HEADBF16-LABEL: func.func @forward
func.func @forward(%ids: tensor<?xi32>) -> tensor<?x96xf32> {
  // W8A8: moe.weight "embed" precision w8a8 group 32 : tensor<96x32xbf16>
  // PLAN: plan.weight "embed" group 32 int8_activations : memref<96x32xi8>
  // OVER: moe.weight "embed" precision int8 group 32 : tensor<96x32xbf16>
  // HEADBF16: moe.weight "embed" precision bf16 : tensor<96x32xbf16>
  // HEADFP8: moe.weight "embed" precision int8 group 32 : tensor<96x32xbf16>
  // INT8HEADW8A8: moe.weight "embed" precision w8a8 group 32 : tensor<96x32xbf16>
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %ids, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %logits = moe.lm_head %x, %emb : (tensor<?x32xf32>, tensor<96x32xbf16>) -> tensor<?x96xf32>
  return %logits : tensor<?x96xf32>
}
