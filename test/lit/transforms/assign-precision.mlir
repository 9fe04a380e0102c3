// moe-assign-precision: components from uses, policies, the tied
// embedding/LM head, vectors left as they are, int4's even-row rule.
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=int8 | FileCheck %s --check-prefix=INT8
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=int4 int4-group=16" | FileCheck %s --check-prefix=INT4
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=bf16 | FileCheck %s --check-prefix=BF16
// RUN: moe-opt %s -split-input-file --moe-assign-precision | FileCheck %s --check-prefix=KEEP
// RUN: not moe-opt %s -split-input-file --moe-assign-precision=policy=int3 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=fp8 fp8-block=16" | FileCheck %s --check-prefix=FP8
// RUN: moe-opt %s -split-input-file --moe-assign-precision=policy=seed | FileCheck %s --check-prefix=SEED
// RUN: moe-opt %s -split-input-file --moe-assign-precision="policy=int8 overrides=experts=int4,router=keep" | FileCheck %s --check-prefix=OVER
// RUN: not moe-opt %s -split-input-file --moe-assign-precision="policy=int4 int4-group=7" 2>&1 | FileCheck %s --check-prefix=BADGROUP
// RUN: not moe-opt %s -split-input-file --moe-assign-precision="overrides=norms=int8" 2>&1 | FileCheck %s --check-prefix=BADOVER

// BAD: unknown precision policy 'int3'; expected keep, fp32, bf16, int8, w8a8, fp8, int4, w4a8 or seed
// BADGROUP: int4-group must be even and at least 2 (got 7) and fp8-block positive (got 128)
// BADOVER: override 'norms=int8' is not <component>=<precision>

// Qwen2-MoE-like block: tied embedding, attention projection with a bias,
// router, routed experts (fused gate_up), a shared expert with its gate.
// INT8-LABEL: func.func @block
// INT4-LABEL: func.func @block
func.func @block(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // The table is also the LM head: both matrices, quantized.
  // INT8: moe.weight "model.embed_tokens.weight" precision int8 group 32 : tensor<64x32xbf16>
  // INT4: moe.weight "model.embed_tokens.weight" precision int4 group 16 : tensor<64x32xbf16>
  // BF16: moe.weight "model.embed_tokens.weight" precision bf16 : tensor<64x32xbf16>
  // KEEP: moe.weight "model.embed_tokens.weight" : tensor<64x32xbf16>
  // The seed table: embedding int8, LM head bf16: the tied table takes bf16.
  // SEED: moe.weight "model.embed_tokens.weight" precision bf16 : tensor<64x32xbf16>
  %emb = moe.weight "model.embed_tokens.weight" : tensor<64x32xbf16>
  %x = moe.embedding %ids, %emb : (tensor<?xi32>, tensor<64x32xbf16>) -> tensor<?x32xf32>
  // Norm weights and biases are vectors: kept, except by the float policies.
  // INT8: moe.weight "model.norm.weight" : tensor<32xbf16>
  // INT4: moe.weight "model.norm.weight" : tensor<32xbf16>
  // BF16: moe.weight "model.norm.weight" precision bf16 : tensor<32xbf16>
  %nw = moe.weight "model.norm.weight" : tensor<32xbf16>
  %n = moe.rms_norm %x, %nw eps 1.0e-6 : (tensor<?x32xf32>, tensor<32xbf16>) -> tensor<?x32xf32>
  // INT8: moe.weight "q_proj.weight" precision int8 group 32 : tensor<32x32xf32>
  // FP8: moe.weight "q_proj.weight" precision fp8 group 16 : tensor<32x32xf32>
  // Attention is not in the seed table: kept.
  // SEED: moe.weight "q_proj.weight" : tensor<32x32xf32>
  // INT8: moe.weight "q_proj.bias" : tensor<32xf32>
  %qw = moe.weight "q_proj.weight" : tensor<32x32xf32>
  %qb = moe.weight "q_proj.bias" : tensor<32xf32>
  %q = moe.linear %n, %qw bias %qb : (tensor<?x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  // INT8: moe.weight "mlp.gate.weight" precision int8 group 32 : tensor<4x32xbf16>
  // INT4: moe.weight "mlp.gate.weight" precision int4 group 16 : tensor<4x32xbf16>
  // fp8 blocks shrink to fit a matrix of 4 rows.
  // FP8: moe.weight "mlp.gate.weight" precision fp8 group 4 : tensor<4x32xbf16>
  // SEED: moe.weight "mlp.gate.weight" precision f32 : tensor<4x32xbf16>
  // OVER: moe.weight "mlp.gate.weight" : tensor<4x32xbf16>
  %g = moe.weight "mlp.gate.weight" : tensor<4x32xbf16>
  %rw, %ri = moe.router %q, %g softmax greedy top_k 2 norm false : (tensor<?x32xf32>, tensor<4x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  // INT8: moe.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] precision int8 group 32 : tensor<4x46x32xbf16>
  // The down projection's rows are 23 long: int4 needs an even length, int8 it is.
  // INT4: moe.weight "mlp.experts.{e}.down_proj.weight" precision int8 group 23 : tensor<4x32x23xbf16>
  // SEED: moe.weight "mlp.experts.{e}.down_proj.weight" precision fp8 group 23 : tensor<4x32x23xbf16>
  // OVER: moe.weight "mlp.experts.{e}.down_proj.weight" precision int8 group 23 : tensor<4x32x23xbf16>
  %gu = moe.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] : tensor<4x46x32xbf16>
  %ed = moe.weight "mlp.experts.{e}.down_proj.weight" : tensor<4x32x23xbf16>
  %r = moe.experts %q routed(%rw, %ri) weights(%gu, %ed) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x46x32xbf16>, tensor<4x32x23xbf16>) -> tensor<?x32xf32>
  // INT8: moe.weight "mlp.shared_expert.gate_proj.weight" precision int8 group 32 : tensor<40x32xbf16>
  // INT8: moe.weight "mlp.shared_expert_gate.weight" : tensor<1x32xbf16>
  // SEED: moe.weight "mlp.shared_expert.gate_proj.weight" precision int8 group 32 : tensor<40x32xbf16>
  %sg = moe.weight "mlp.shared_expert.gate_proj.weight" : tensor<40x32xbf16>
  %su = moe.weight "mlp.shared_expert.up_proj.weight" : tensor<40x32xbf16>
  %sd = moe.weight "mlp.shared_expert.down_proj.weight" : tensor<32x40xbf16>
  %sgate = moe.weight "mlp.shared_expert_gate.weight" : tensor<1x32xbf16>
  %s = moe.shared_expert %q, %sg, %su, %sd sigmoid_gate %sgate : (tensor<?x32xf32>, tensor<40x32xbf16>, tensor<40x32xbf16>, tensor<32x40xbf16>, tensor<1x32xbf16>) -> tensor<?x32xf32>
  %m = moe.add %r, %s : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  %logits = moe.lm_head %m, %emb : (tensor<?x32xf32>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  return %logits : tensor<?x64xf32>
}

// -----

// Block-scaled fp8 weights keep their precision; a weight that is only a
// norm's stays float under int8.
// INT8-LABEL: func.func @fp8
func.func @fp8(%x: tensor<?x256xf32>) -> tensor<?x128xf32> {
  // INT8: moe.weight "q_a_proj.weight" scale "q_a_proj.weight_scale_inv" block [128, 128] : tensor<128x256xf8E4M3FN>
  %w = moe.weight "q_a_proj.weight" scale "q_a_proj.weight_scale_inv" block [128, 128] : tensor<128x256xf8E4M3FN>
  %y = moe.linear %x, %w : (tensor<?x256xf32>, tensor<128x256xf8E4M3FN>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
