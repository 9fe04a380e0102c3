// moe-assign-precision policy=w4a8: every matrix the runtime multiplies
// through linear()/linearGroup()/experts() becomes w4a8 (int4 with one scale
// per int4-group elements, int8 activations); the router, the embedding
// table and MLA's kv_b get plain int4; a tied embedding/LM head takes w4a8
// (its lookup reads the same int4 rows); a matrix with an odd row length
// gets w8a8; vectors stay as stored. int4-group must be a multiple of 128
// (the kernels' integer blocks); overrides accept w4a8 where it applies and
// refuse it for the embedding table. moe-to-plan stores w4a8 as i4 with
// `int8_activations`.
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=w4a8 | FileCheck %s --check-prefix=W4A8
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=w4a8 --moe-fuse-experts --moe-to-plan | FileCheck %s --check-prefix=PLAN
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=int4 overrides=experts=w4a8,lm_head=w4a8" | FileCheck %s --check-prefix=OVER
// RUN: not moe-opt %s -split-input-file --moe-assign-precision="policy=w4a8 int4-group=64" 2>&1 | FileCheck %s --check-prefix=BADGROUP
// RUN: not moe-opt %s -split-input-file --moe-assign-precision="policy=w4a8 overrides=embedding=w4a8" 2>&1 | FileCheck %s --check-prefix=BADEMB

// BADGROUP: w4a8 needs an int4-group that is a multiple of 128 (got 64)
// BADEMB: override 'embedding=w4a8': the embedding table is looked up by row, not multiplied, so it cannot quantize activations; w4a8 applies to lm_head, router, experts, shared_expert, dense_mlp and attention

// MLA attention (kv_b), a router, routed experts, an LM head of its own.
// W4A8-LABEL: func.func @forward
// PLAN-LABEL: func.func @main
// OVER-LABEL: func.func @forward
func.func @forward(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x96xf32> {
  // W4A8: moe.weight "embed" precision int4 group 128 : tensor<96x256xbf16>
  // PLAN: plan.weight "embed" group 128 : memref<96x256xi4>
  // OVER: moe.weight "embed" precision int4 group 128 : tensor<96x256xbf16>
  %emb = moe.weight "embed" : tensor<96x256xbf16>
  %x = moe.embedding %ids, %emb : (tensor<?xi32>, tensor<96x256xbf16>) -> tensor<?x256xf32>
  // Groups of 128 in a row of 256.
  // W4A8: moe.weight "q.weight" precision w4a8 group 128 : tensor<48x256xbf16>
  // PLAN: plan.weight "q.weight" group 128 int8_activations : memref<48x256xi4>
  // Not in the override's components: int4.
  // OVER: moe.weight "q.weight" precision int4 group 128 : tensor<48x256xbf16>
  %qw = moe.weight "q.weight" : tensor<48x256xbf16>
  %q = moe.linear %x, %qw : (tensor<?x256xf32>, tensor<48x256xbf16>) -> tensor<?x48xf32>
  // W4A8: moe.weight "kv_a.weight" precision w4a8 group 128 : tensor<20x256xbf16>
  %kvw = moe.weight "kv_a.weight" : tensor<20x256xbf16>
  %kva = moe.linear %x, %kvw : (tensor<?x256xf32>, tensor<20x256xbf16>) -> tensor<?x20xf32>
  %kvn = moe.weight "kv_a_layernorm.weight" : tensor<16xbf16>
  // kv_b is read by the MLA kernel, which does not quantize activations.
  // W4A8: moe.weight "kv_b.weight" precision int4 group 16 : tensor<56x16xbf16>
  // PLAN: plan.weight "kv_b.weight" group 16 : memref<56x16xi4>
  %kvb = moe.weight "kv_b.weight" : tensor<56x16xbf16>
  %a = moe.mla_attention %q, %kva, %kvn, %kvb positions %pos layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  // A row shorter than a group: one group a row.
  // W4A8: moe.weight "o.weight" precision w4a8 group 24 : tensor<256x24xbf16>
  // PLAN: plan.weight "o.weight" group 24 int8_activations : memref<256x24xi4>
  %ow = moe.weight "o.weight" : tensor<256x24xbf16>
  %o = moe.linear %a, %ow : (tensor<?x24xf32>, tensor<256x24xbf16>) -> tensor<?x256xf32>
  // An odd row length: int4 packs pairs, so w8a8 (int8, one scale a row).
  // (Unused, these two leave no plan.weight.)
  // W4A8: moe.weight "p.weight" precision w4a8 group 128 : tensor<255x256xbf16>
  // W4A8: moe.weight "odd.weight" precision w8a8 group 255 : tensor<8x255xbf16>
  %pw = moe.weight "p.weight" : tensor<255x256xbf16>
  %p = moe.linear %x, %pw : (tensor<?x256xf32>, tensor<255x256xbf16>) -> tensor<?x255xf32>
  %odw = moe.weight "odd.weight" : tensor<8x255xbf16>
  %odd = moe.linear %p, %odw : (tensor<?x255xf32>, tensor<8x255xbf16>) -> tensor<?x8xf32>
  // The router keeps int4 weights (f32 activations), as under the int4 policy.
  // W4A8: moe.weight "mlp.gate.weight" precision int4 group 128 : tensor<4x256xbf16>
  // PLAN: plan.weight "mlp.gate.weight" group 128 : memref<4x256xi4>
  %g = moe.weight "mlp.gate.weight" : tensor<4x256xbf16>
  %rw, %ri = moe.router %o, %g softmax greedy top_k 2 norm false : (tensor<?x256xf32>, tensor<4x256xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // W4A8: moe.weight "mlp.experts.{e}.gate_proj.weight" precision w4a8 group 128 : tensor<4x24x256xbf16>
  // W4A8: moe.weight "mlp.experts.{e}.down_proj.weight" precision w4a8 group 24 : tensor<4x256x24xbf16>
  // PLAN: plan.weight "mlp.experts.{e}.down_proj.weight" group 24 int8_activations : memref<4x256x24xi4>
  // PLAN: plan.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] group 128 int8_activations : memref<4x48x256xi4>
  // OVER: moe.weight "mlp.experts.{e}.gate_proj.weight" precision w4a8 group 128 : tensor<4x24x256xbf16>
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<4x24x256xbf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" : tensor<4x24x256xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<4x256x24xbf16>
  %r = moe.experts %o routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x256xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x24x256xbf16>, tensor<4x24x256xbf16>, tensor<4x256x24xbf16>) -> tensor<?x256xf32>
  // W4A8: moe.weight "lm_head.weight" precision w4a8 group 128 : tensor<96x256xbf16>
  // PLAN: plan.weight "lm_head.weight" group 128 int8_activations : memref<96x256xi4>
  // OVER: moe.weight "lm_head.weight" precision w4a8 group 128 : tensor<96x256xbf16>
  %hw = moe.weight "lm_head.weight" : tensor<96x256xbf16>
  %logits = moe.lm_head %r, %hw : (tensor<?x256xf32>, tensor<96x256xbf16>) -> tensor<?x96xf32>
  return %logits : tensor<?x96xf32>
}

// -----

// A tied embedding/LM head takes the LM head's w4a8 (the lookup reads the
// same int4 rows), under the w4a8 policy or an lm_head override of int4.
// W4A8-LABEL: func.func @forward
// PLAN-LABEL: func.func @main
// OVER-LABEL: func.func @forward
func.func @forward(%ids: tensor<?xi32>) -> tensor<?x96xf32> {
  // W4A8: moe.weight "embed" precision w4a8 group 128 : tensor<96x256xbf16>
  // PLAN: plan.weight "embed" group 128 int8_activations : memref<96x256xi4>
  // OVER: moe.weight "embed" precision w4a8 group 128 : tensor<96x256xbf16>
  %emb = moe.weight "embed" : tensor<96x256xbf16>
  %x = moe.embedding %ids, %emb : (tensor<?xi32>, tensor<96x256xbf16>) -> tensor<?x256xf32>
  %logits = moe.lm_head %x, %emb : (tensor<?x256xf32>, tensor<96x256xbf16>) -> tensor<?x96xf32>
  return %logits : tensor<?x96xf32>
}
