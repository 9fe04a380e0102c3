// moe-assign-precision over `stored` weights (a GPTQ or AWQ checkpoint's own
// integers): every policy leaves them as they are, except that a policy
// giving their component w4a8 (w8a8) makes stored int4 (int8) w4a8 (w8a8):
// the same bytes, int8 activations, where the group is a multiple of 128 or
// the whole row (w8a8: the whole row). MLA's kv_b stays int4 (its kernel
// takes f32 activations).
// The other weights follow the policy. moe-fuse-experts joins gate and up
// only when both are stored (or neither).
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=w4a8 | FileCheck %s --check-prefix=W4A8
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=fp32 | FileCheck %s --check-prefix=FP32
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=w8a8 | FileCheck %s --check-prefix=W8A8
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=w4a8 --moe-fuse-experts | FileCheck %s --check-prefix=FUSE

// W4A8-LABEL: func.func @forward
// FP32-LABEL: func.func @forward
// W8A8-LABEL: func.func @forward
func.func @forward(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x96xf32> {
  // W4A8: moe.weight "embed" precision int4 group 128 : tensor<96x256xbf16>
  // FP32: moe.weight "embed" precision f32 : tensor<96x256xbf16>
  %emb = moe.weight "embed" : tensor<96x256xbf16>
  %x = moe.embedding %ids, %emb : (tensor<?xi32>, tensor<96x256xbf16>) -> tensor<?x256xf32>
  // Groups of 128: w4a8 under the w4a8 policy.
  // W4A8: moe.weight "q.weight" precision w4a8 group 128 stored : tensor<48x256xf16>
  // FP32: moe.weight "q.weight" precision int4 group 128 stored : tensor<48x256xf16>
  %qw = moe.weight "q.weight" precision int4 group 128 stored : tensor<48x256xf16>
  %q = moe.linear %x, %qw : (tensor<?x256xf32>, tensor<48x256xf16>) -> tensor<?x48xf32>
  // Stored int8 (zero points): w8a8 only with one group a row.
  // W4A8: moe.weight "k.weight" precision int8 group 256 stored : tensor<48x256xf16>
  // W8A8: moe.weight "k.weight" precision w8a8 group 256 stored : tensor<48x256xf16>
  // W8A8: moe.weight "v.weight" precision int8 group 128 stored : tensor<48x256xf16>
  %kw = moe.weight "k.weight" precision int8 group 256 stored : tensor<48x256xf16>
  %k = moe.linear %x, %kw : (tensor<?x256xf32>, tensor<48x256xf16>) -> tensor<?x48xf32>
  %vw = moe.weight "v.weight" precision int8 group 128 stored : tensor<48x256xf16>
  %v = moe.linear %x, %vw : (tensor<?x256xf32>, tensor<48x256xf16>) -> tensor<?x48xf32>
  // Groups of 32: w4a8's integer blocks of 128 would span four scales.
  // W4A8: moe.weight "kv_a.weight" precision int4 group 32 stored : tensor<20x256xf16>
  %kvw = moe.weight "kv_a.weight" precision int4 group 32 stored : tensor<20x256xf16>
  %kva = moe.linear %x, %kvw : (tensor<?x256xf32>, tensor<20x256xf16>) -> tensor<?x20xf32>
  %kvn = moe.weight "kv_a_layernorm.weight" : tensor<16xbf16>
  // W4A8: moe.weight "kv_b.weight" precision int4 group 16 stored : tensor<56x16xf16>
  %kvb = moe.weight "kv_b.weight" precision int4 group 16 stored : tensor<56x16xf16>
  %a = moe.mla_attention %q, %kva, %kvn, %kvb positions %pos layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xf16>, tensor<?xi32>) -> tensor<?x24xf32>
  // One group a row of 24: w4a8.
  // W4A8: moe.weight "o.weight" precision w4a8 group 24 stored : tensor<256x24xf16>
  %ow = moe.weight "o.weight" precision int4 group 24 stored : tensor<256x24xf16>
  %o = moe.linear %a, %ow : (tensor<?x24xf32>, tensor<256x24xf16>) -> tensor<?x256xf32>
  %g = moe.weight "mlp.gate.weight" : tensor<4x256xbf16>
  %rw, %ri = moe.router %o, %g softmax greedy top_k 2 norm false : (tensor<?x256xf32>, tensor<4x256xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // Gate and up both stored: one stack, still stored. Down is not.
  // FUSE: moe.weight "mlp.experts.{e}.down_proj.weight" precision w4a8 group 24 : tensor<4x256x24xbf16>
  // FUSE: moe.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] precision w4a8 group 128 stored : tensor<4x48x256xf16>
  %eg = moe.weight "mlp.experts.{e}.gate_proj.weight" precision int4 group 128 stored : tensor<4x24x256xf16>
  %eu = moe.weight "mlp.experts.{e}.up_proj.weight" precision int4 group 128 stored : tensor<4x24x256xf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<4x256x24xbf16>
  %r = moe.experts %o routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x256xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x24x256xf16>, tensor<4x24x256xf16>, tensor<4x256x24xbf16>) -> tensor<?x256xf32>
  %hw = moe.weight "lm_head.weight" : tensor<96x256xbf16>
  %logits = moe.lm_head %r, %hw : (tensor<?x256xf32>, tensor<96x256xbf16>) -> tensor<?x96xf32>
  return %logits : tensor<?x96xf32>
}

// -----

// Gate stored, up not (a checkpoint that left one unquantized): not fused,
// since one int4 stack would round the GPTQ values again.
// FUSE-LABEL: func.func @mixed
func.func @mixed(%x: tensor<?x256xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>) -> tensor<?x256xf32> {
  // FUSE: moe.weight "e.{e}.g" precision w4a8 group 128 stored
  // FUSE: moe.weight "e.{e}.u" precision w4a8 group 128 :
  %eg = moe.weight "e.{e}.g" precision int4 group 128 stored : tensor<4x24x256xf16>
  %eu = moe.weight "e.{e}.u" : tensor<4x24x256xf16>
  %ed = moe.weight "e.{e}.d" : tensor<4x256x24xf16>
  %r = moe.experts %x routed(%rw, %ri) weights(%eg, %eu, %ed) : (tensor<?x256xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x24x256xf16>, tensor<4x24x256xf16>, tensor<4x256x24xf16>) -> tensor<?x256xf32>
  return %r : tensor<?x256xf32>
}
