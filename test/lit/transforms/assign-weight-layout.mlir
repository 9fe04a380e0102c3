// moe-assign-precision weight-layout=panels: every weight stored as f32,
// bf16 or f16 whose matrices have a multiple of 8 rows, that the kernels
// multiplying through linear()/linearGroup()/experts() read and nothing
// else but an embedding lookup gets `panels` (so a table tied to the LM
// head does); an untied embedding table, MLA's kv_b, vectors, matrices of
// other row counts and quantized weights stay rows.
// moe-fuse-experts keeps panels on a fused gate_up, moe-to-plan carries
// them to plan.weight; weight-layout=rows (the default) sets none.
// RUN: moe-opt %s -split-input-file --moe-assign-precision=weight-layout=panels | FileCheck %s --check-prefix=PANELS
// RUN: moe-opt %s -split-input-file --moe-assign-precision="weight-layout=panels" --moe-fuse-experts --moe-to-plan | FileCheck %s --check-prefix=PLAN
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=keep overrides=experts=int8,attention=f32 weight-layout=panels" | FileCheck %s --check-prefix=MIXED
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=int8 weight-layout=panels" | FileCheck %s --check-prefix=INT8
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=bf16 | FileCheck %s --check-prefix=ROWS
// RUN: not moe-opt %s -split-input-file --moe-assign-precision=weight-layout=columns 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: unknown weight layout 'columns'; expected rows or panels
// ROWS-NOT: panels
// INT8-NOT: panels

// DeepSeek-like: MLA attention (kv_b), a dense MLP layer, a router of 4
// experts, routed experts, a gated shared expert, an LM head of its own.
// PANELS-LABEL: func.func @forward
// PLAN-LABEL: func.func @main
// MIXED-LABEL: func.func @forward
func.func @forward(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x96xf32> {
  // PANELS: moe.weight "embed" : tensor<96x32xbf16>
  // PLAN: plan.weight "embed" : memref<96x32xbf16>
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %ids, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  // PANELS: moe.weight "q.weight" panels : tensor<48x32xbf16>
  // PLAN: plan.weight "q.weight" panels : memref<48x32xbf16>
  // MIXED: moe.weight "q.weight" precision f32 panels : tensor<48x32xbf16>
  %qw = moe.weight "q.weight" : tensor<48x32xbf16>
  %q = moe.linear %x, %qw : (tensor<?x32xf32>, tensor<48x32xbf16>) -> tensor<?x48xf32>
  // 20 rows: not whole panels.
  // PANELS: moe.weight "kv_a.weight" : tensor<20x32xbf16>
  %kvw = moe.weight "kv_a.weight" : tensor<20x32xbf16>
  %kva = moe.linear %x, %kvw : (tensor<?x32xf32>, tensor<20x32xbf16>) -> tensor<?x20xf32>
  // PANELS: moe.weight "kv_a_layernorm.weight" : tensor<16xbf16>
  %kvn = moe.weight "kv_a_layernorm.weight" : tensor<16xbf16>
  // kv_b is read by the MLA kernel, by rows.
  // PANELS: moe.weight "kv_b.weight" : tensor<56x16xbf16>
  // PLAN: plan.weight "kv_b.weight" : memref<56x16xbf16>
  %kvb = moe.weight "kv_b.weight" : tensor<56x16xbf16>
  %a = moe.mla_attention %q, %kva, %kvn, %kvb positions %pos layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  // PANELS: moe.weight "o.weight" panels : tensor<32x24xbf16>
  %ow = moe.weight "o.weight" : tensor<32x24xbf16>
  %o = moe.linear %a, %ow : (tensor<?x24xf32>, tensor<32x24xbf16>) -> tensor<?x32xf32>
  // PANELS: moe.weight "mlp.gate_proj.weight" panels : tensor<40x32xbf16>
  // PANELS: moe.weight "mlp.down_proj.weight" panels : tensor<32x40xbf16>
  // PLAN: plan.weight "mlp.down_proj.weight" panels : memref<32x40xbf16>
  %dg = moe.weight "mlp.gate_proj.weight" : tensor<40x32xbf16>
  %du = moe.weight "mlp.up_proj.weight" : tensor<40x32xbf16>
  %dd = moe.weight "mlp.down_proj.weight" : tensor<32x40xbf16>
  %d = moe.swiglu_mlp %o, %dg, %du, %dd : (tensor<?x32xf32>, tensor<40x32xbf16>, tensor<40x32xbf16>, tensor<32x40xbf16>) -> tensor<?x32xf32>
  // 4 experts: 4 rows, not a panel.
  // PANELS: moe.weight "mlp.gate.weight" : tensor<4x32xbf16>
  %g = moe.weight "mlp.gate.weight" : tensor<4x32xbf16>
  %rw, %ri = moe.router %d, %g softmax greedy top_k 2 norm false : (tensor<?x32xf32>, tensor<4x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // PANELS: moe.weight "mlp.experts.{e}.gate_proj.weight" panels : tensor<4x24x32xbf16>
  // PANELS: moe.weight "mlp.experts.{e}.down_proj.weight" panels : tensor<4x32x24xbf16>
  // The fused gate_up (made after down) keeps its panels.
  // PLAN: plan.weight "mlp.experts.{e}.down_proj.weight" panels : memref<4x32x24xbf16>
  // PLAN: plan.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] panels : memref<4x48x32xbf16>
  // Quantized: rows.
  // MIXED: moe.weight "mlp.experts.{e}.gate_proj.weight" precision int8 group 32 : tensor<4x24x32xbf16>
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" : tensor<4x24x32xbf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" : tensor<4x24x32xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<4x32x24xbf16>
  %r = moe.experts %d routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x24x32xbf16>, tensor<4x24x32xbf16>, tensor<4x32x24xbf16>) -> tensor<?x32xf32>
  // PANELS: moe.weight "mlp.shared_experts.gate_proj.weight" panels : tensor<24x32xbf16>
  // PANELS: moe.weight "mlp.shared_expert_gate.weight" : tensor<1x32xbf16>
  %sg = moe.weight "mlp.shared_experts.gate_proj.weight" : tensor<24x32xbf16>
  %su = moe.weight "mlp.shared_experts.up_proj.weight" : tensor<24x32xbf16>
  %sd = moe.weight "mlp.shared_experts.down_proj.weight" : tensor<32x24xbf16>
  %sgate = moe.weight "mlp.shared_expert_gate.weight" : tensor<1x32xbf16>
  %s = moe.shared_expert %d, %sg, %su, %sd sigmoid_gate %sgate : (tensor<?x32xf32>, tensor<24x32xbf16>, tensor<24x32xbf16>, tensor<32x24xbf16>, tensor<1x32xbf16>) -> tensor<?x32xf32>
  %m = moe.add %r, %s : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  // PANELS: moe.weight "lm_head.weight" panels : tensor<96x32xbf16>
  // PLAN: plan.weight "lm_head.weight" panels : memref<96x32xbf16>
  // MIXED: moe.weight "lm_head.weight" panels : tensor<96x32xbf16>
  %hw = moe.weight "lm_head.weight" : tensor<96x32xbf16>
  %logits = moe.lm_head %m, %hw : (tensor<?x32xf32>, tensor<96x32xbf16>) -> tensor<?x96xf32>
  return %logits : tensor<?x96xf32>
}

// -----

// A table tied to the LM head takes panels (the lookup gathers a row from
// its panel); a router of 8 experts is one panel.
// PANELS-LABEL: func.func @forward
// PLAN-LABEL: func.func @main
// PANELS: moe.weight "embed" panels : tensor<96x32xf32>
// PANELS: moe.weight "mlp.gate.weight" panels : tensor<8x32xf16>
// PLAN: plan.weight "embed" panels : memref<96x32xf32>
func.func @forward(%ids: tensor<?xi32>) -> tensor<?x96xf32> {
  %emb = moe.weight "embed" : tensor<96x32xf32>
  %x = moe.embedding %ids, %emb : (tensor<?xi32>, tensor<96x32xf32>) -> tensor<?x32xf32>
  %g = moe.weight "mlp.gate.weight" : tensor<8x32xf16>
  %rw, %ri = moe.router %x, %g softmax greedy top_k 2 norm false : (tensor<?x32xf32>, tensor<8x32xf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %logits = moe.lm_head %x, %emb : (tensor<?x32xf32>, tensor<96x32xf32>) -> tensor<?x96xf32>
  return %logits : tensor<?x96xf32>
}
