// One case per verifier error of the moe dialect; each message quotes the
// offending types or attributes.
// RUN: moe-opt %s -split-input-file -verify-diagnostics

func.func @c0() {
  // expected-error @+1 {{needs a non-empty checkpoint tensor name}}
  %0 = moe.weight "" : tensor<4xbf16>
  return
}

// -----

func.func @c1() {
  // expected-error @+1 {{weight 'w' must have a static shape, got 'tensor<?x4xbf16>'}}
  %0 = moe.weight "w" : tensor<?x4xbf16>
  return
}

// -----

func.func @c2() {
  // expected-error @+1 {{weight 'w' has element type 'i32'; expected f32, bf16, f16 or f8E4M3FN}}
  %0 = moe.weight "w" : tensor<4xi32>
  return
}

// -----

func.func @c3() {
  // expected-error @+1 {{weight 'x.{e}.{e}' has 2 '{e}' placeholders; at most one is allowed}}
  %0 = moe.weight "x.{e}.{e}" : tensor<4x4xbf16>
  return
}

// -----

func.func @c4() {
  // expected-error @+1 {{per-expert weight 'x.{e}' needs the expert count as leading dimension (rank >= 2), got 'tensor<4xbf16>'}}
  %0 = moe.weight "x.{e}" : tensor<4xbf16>
  return
}

// -----

func.func @c5() {
  // expected-error @+1 {{weight 'w' needs both 'scale' and 'block' or neither}}
  %0 = "moe.weight"() {name = "w", scale = "s"} : () -> tensor<4x4xf8E4M3FN>
  return
}

// -----

func.func @c6() {
  // expected-error @+1 {{f8E4M3FN weight 'w' needs a block scale ('scale' and 'block')}}
  %0 = moe.weight "w" : tensor<4x4xf8E4M3FN>
  return
}

// -----

func.func @c7() {
  // expected-error @+1 {{weight 'w' of element type 'bf16' has a block scale; block scales apply to f8E4M3FN weights only}}
  %0 = moe.weight "w" scale "s" block [2, 2] : tensor<4x4xbf16>
  return
}

// -----

func.func @c8() {
  // expected-error @+1 {{block of weight 'w' must be two positive sizes, got [128]}}
  %0 = moe.weight "w" scale "s" block [128] : tensor<4x4xf8E4M3FN>
  return
}

// -----

func.func @c9() {
  // expected-error @+1 {{block-scaled weight 'w' must have rank >= 2, got 'tensor<4xf8E4M3FN>'}}
  %0 = moe.weight "w" scale "s" block [2, 2] : tensor<4xf8E4M3FN>
  return
}

// -----

func.func @c10() {
  // expected-error @+1 {{scale 's' of weight 'x.{e}' must be per expert exactly when the weight is}}
  %0 = moe.weight "x.{e}" scale "s" block [2, 2] : tensor<2x4x4xf8E4M3FN>
  return
}

// -----

func.func @c11(%i: tensor<2x3xi32>, %t: tensor<8x4xbf16>) {
  // expected-error @+1 {{ids must be a rank-1 tensor, got 'tensor<2x3xi32>'}}
  %0 = moe.embedding %i, %t : (tensor<2x3xi32>, tensor<8x4xbf16>) -> tensor<?x4xf32>
  return
}

// -----

func.func @c12(%i: tensor<?xf32>, %t: tensor<8x4xbf16>) {
  // expected-error @+1 {{ids must hold integers, got 'tensor<?xf32>'}}
  %0 = moe.embedding %i, %t : (tensor<?xf32>, tensor<8x4xbf16>) -> tensor<?x4xf32>
  return
}

// -----

func.func @c13(%i: tensor<?xi32>, %t: tensor<8xbf16>) {
  // expected-error @+1 {{table must be a rank-2 tensor, got 'tensor<8xbf16>'}}
  %0 = moe.embedding %i, %t : (tensor<?xi32>, tensor<8xbf16>) -> tensor<?x4xf32>
  return
}

// -----

func.func @c14(%i: tensor<3xi32>, %t: tensor<8x4xbf16>) {
  // expected-error @+1 {{result must have shape [3, 4], got 'tensor<3x5xf32>'}}
  %0 = moe.embedding %i, %t : (tensor<3xi32>, tensor<8x4xbf16>) -> tensor<3x5xf32>
  return
}

// -----

func.func @c15(%x: tensor<?x4xf32>, %w: tensor<4xbf16>) {
  // expected-error @+1 {{eps must be positive, got 0}}
  %0 = moe.rms_norm %x, %w eps 0.0 : (tensor<?x4xf32>, tensor<4xbf16>) -> tensor<?x4xf32>
  return
}

// -----

func.func @c16(%x: tensor<f32>, %w: tensor<4xbf16>) {
  // expected-error @+1 {{input must have rank >= 1, got 'tensor<f32>'}}
  %0 = moe.rms_norm %x, %w eps 1.0e-6 : (tensor<f32>, tensor<4xbf16>) -> tensor<f32>
  return
}

// -----

func.func @c17(%x: tensor<?x4xf32>, %w: tensor<5xbf16>) {
  // expected-error @+1 {{weight must have shape [4], got 'tensor<5xbf16>'}}
  %0 = moe.rms_norm %x, %w eps 1.0e-6 : (tensor<?x4xf32>, tensor<5xbf16>) -> tensor<?x4xf32>
  return
}

// -----

func.func @c18(%x: tensor<?x4xf32>, %w: tensor<4xbf16>) {
  // expected-error @+1 {{result type 'tensor<?x4xf16>' must equal input type 'tensor<?x4xf32>'}}
  %0 = moe.rms_norm %x, %w eps 1.0e-6 : (tensor<?x4xf32>, tensor<4xbf16>) -> tensor<?x4xf16>
  return
}

// -----

func.func @c19(%x: tensor<4xf32>, %w: tensor<8x4xbf16>) {
  // expected-error @+1 {{input must be a rank-2 tensor, got 'tensor<4xf32>'}}
  %0 = moe.linear %x, %w : (tensor<4xf32>, tensor<8x4xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c20(%x: tensor<?x4xf32>, %w: tensor<2x8x4xbf16>) {
  // expected-error @+1 {{weight must be a rank-2 tensor, got 'tensor<2x8x4xbf16>'}}
  %0 = moe.linear %x, %w : (tensor<?x4xf32>, tensor<2x8x4xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c21(%x: tensor<?x4xf32>, %w: tensor<8x5xbf16>) {
  // expected-error @+1 {{weight must have shape [*, 4], got 'tensor<8x5xbf16>'}}
  %0 = moe.linear %x, %w : (tensor<?x4xf32>, tensor<8x5xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c22(%x: tensor<?x4xf32>, %w: tensor<8x4xbf16>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{bias must have shape [8], got 'tensor<4xbf16>'}}
  %0 = moe.linear %x, %w bias %b : (tensor<?x4xf32>, tensor<8x4xbf16>, tensor<4xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c23(%x: tensor<?x4xf32>, %w: tensor<8x4xbf16>) {
  // expected-error @+1 {{result must have shape [*, 8], got 'tensor<?x4xf32>'}}
  %0 = moe.linear %x, %w : (tensor<?x4xf32>, tensor<8x4xbf16>) -> tensor<?x4xf32>
  return
}

// -----

func.func @c24(%a: tensor<?x4xf32>, %b: tensor<?x5xf32>) {
  // expected-error @+1 {{operands and result must have one type, got 'tensor<?x4xf32>', 'tensor<?x5xf32>' -> 'tensor<?x4xf32>'}}
  %0 = moe.add %a, %b : (tensor<?x4xf32>, tensor<?x5xf32>) -> tensor<?x4xf32>
  return
}

// -----

func.func @c25(%x: tensor<4xf32>, %w: tensor<8x4xbf16>) {
  // expected-error @+1 {{input must be a rank-2 tensor, got 'tensor<4xf32>'}}
  %0 = moe.lm_head %x, %w : (tensor<4xf32>, tensor<8x4xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c26(%x: tensor<?x4xf32>, %w: tensor<8xbf16>) {
  // expected-error @+1 {{weight must be a rank-2 tensor, got 'tensor<8xbf16>'}}
  %0 = moe.lm_head %x, %w : (tensor<?x4xf32>, tensor<8xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c27(%x: tensor<?x4xf32>, %w: tensor<8x3xbf16>) {
  // expected-error @+1 {{weight must have shape [*, 4], got 'tensor<8x3xbf16>'}}
  %0 = moe.lm_head %x, %w : (tensor<?x4xf32>, tensor<8x3xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c28(%x: tensor<?x4xf32>, %w: tensor<8x4xbf16>) {
  // expected-error @+1 {{result must have shape [*, 8], got 'tensor<?x9xf32>'}}
  %0 = moe.lm_head %x, %w : (tensor<?x4xf32>, tensor<8x4xbf16>) -> tensor<?x9xf32>
  return
}

// -----

func.func @c29(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{num_heads must be positive, got 0}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 0 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c30(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{num_kv_heads must be positive, got 0}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 0 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c31(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{head_dim must be positive, got -8}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim -8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c32(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{layer must be >= 0, got -1}}
  %0 = moe.attention %q, %k, %v positions %p layer -1 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c33(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{num_heads 4 must be a multiple of num_kv_heads 3}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 3 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c34(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{rope_theta must be positive, got 0}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 0.0 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c35(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{sliding_window must be positive, got 0}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64, sliding_window = 0 : i64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c36(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{rope_scaling needs a string 'rope_type' (or 'type'), got {factor = 2.000000e+00 : f64}}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64, rope_scaling = {factor = 2.0 : f64}} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c37(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{rope_scaling factor must be positive, got -2}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64, rope_scaling = {type = "linear", factor = -2.0 : f64}} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c38(%q: tensor<32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{q must be a rank-2 tensor, got 'tensor<32xf32>'}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c39(%q: tensor<?x24xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{q must have shape [*, 32], got 'tensor<?x24xf32>'}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x24xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c40(%q: tensor<3x32xf32>, %k: tensor<4x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{k must have shape [3, 16], got 'tensor<4x16xf32>'}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<3x32xf32>, tensor<4x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c41(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x8xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{v must have shape [*, 16], got 'tensor<?x8xf32>'}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c42(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?x1xi32>) {
  // expected-error @+1 {{positions must have shape [*], got 'tensor<?x1xi32>'}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x1xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c43(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xf32>) {
  // expected-error @+1 {{positions must hold integers, got 'tensor<?xf32>'}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xf32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c44(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>, %n: tensor<8xbf16>) {
  // expected-error @+1 {{qk_norm takes 2 weights (q, k), got 1}}
  %0 = moe.attention %q, %k, %v positions %p qk_norm(%n) layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>, tensor<8xbf16>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c45(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>, %n: tensor<8xbf16>, %m: tensor<7xbf16>) {
  // expected-error @+1 {{qk_norm weight must have shape [8], got 'tensor<7xbf16>'}}
  %0 = moe.attention %q, %k, %v positions %p qk_norm(%n, %m) layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>, tensor<8xbf16>, tensor<7xbf16>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c46(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{result must have shape [*, 32], got 'tensor<?x16xf32>'}}
  %0 = moe.attention %q, %k, %v positions %p layer 0 heads 4 kv_heads 2 head_dim 8 {rope_theta = 1.0e4 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @c47(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{num_heads must be positive, got 0}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 0 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c48(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{kv_lora_rank must be positive, got 0}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 0 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c49(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{qk_nope_head_dim must be positive, got 0}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(0, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c50(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{qk_rope_head_dim must be positive, got 0}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 0) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c51(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{v_head_dim must be positive, got 0}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 0 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c52(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{qk_rope_head_dim must be even, got 3}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 3) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c53(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{layer must be >= 0, got -2}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer -2 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c54(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{softmax_scale must be positive, got 0}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.0 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c55(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{rope_theta must be positive, got -1}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = -1.0 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c56(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{rope_scaling needs a string 'rope_type' (or 'type'), got {factor = 4 : i64}}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64, rope_scaling = {factor = 4 : i64}} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c57(%q: tensor<48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{q must be a rank-2 tensor, got 'tensor<48xf32>'}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c58(%q: tensor<?x40xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{q must have shape [*, 48], got 'tensor<?x40xf32>'}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x40xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c59(%q: tensor<?x48xf32>, %kv: tensor<?x16xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{kv_a must have shape [*, 20], got 'tensor<?x16xf32>'}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x16xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c60(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<20xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{kv_norm weight must have shape [16], got 'tensor<20xbf16>'}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<20xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c61(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<16x56xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{kv_b weight must have shape [56, 16], got 'tensor<16x56xbf16>'}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<16x56xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @c62(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %n: tensor<16xbf16>, %b: tensor<56x16xbf16>, %p: tensor<?xi32>) {
  // expected-error @+1 {{result must have shape [*, 24], got 'tensor<?x32xf32>'}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @c63(%x: tensor<8xf32>, %g: tensor<16x8xbf16>, %u: tensor<16x8xbf16>, %d: tensor<8x16xbf16>) {
  // expected-error @+1 {{input must be a rank-2 tensor, got 'tensor<8xf32>'}}
  %0 = moe.swiglu_mlp %x, %g, %u, %d : (tensor<8xf32>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c64(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>, %u: tensor<16x8xbf16>, %d: tensor<8xbf16>) {
  // expected-error @+1 {{down weight must be a rank-2 tensor, got 'tensor<8xbf16>'}}
  %0 = moe.swiglu_mlp %x, %g, %u, %d : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<8xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c65(%x: tensor<?x8xf32>, %g: tensor<16x9xbf16>, %u: tensor<16x8xbf16>, %d: tensor<8x16xbf16>) {
  // expected-error @+1 {{gate weight must have shape [16, 8], got 'tensor<16x9xbf16>'}}
  %0 = moe.swiglu_mlp %x, %g, %u, %d : (tensor<?x8xf32>, tensor<16x9xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c66(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>, %u: tensor<15x8xbf16>, %d: tensor<8x16xbf16>) {
  // expected-error @+1 {{up weight must have shape [16, 8], got 'tensor<15x8xbf16>'}}
  %0 = moe.swiglu_mlp %x, %g, %u, %d : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<15x8xbf16>, tensor<8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c67(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>, %u: tensor<16x8xbf16>, %d: tensor<9x16xbf16>) {
  // expected-error @+1 {{down weight must have shape [8, 16], got 'tensor<9x16xbf16>'}}
  %0 = moe.swiglu_mlp %x, %g, %u, %d : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<9x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c68(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>, %u: tensor<16x8xbf16>, %d: tensor<8x16xbf16>) {
  // expected-error @+1 {{result must have shape [*, 8], got 'tensor<?x16xf32>'}}
  %0 = moe.swiglu_mlp %x, %g, %u, %d : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> tensor<?x16xf32>
  return
}

// -----

func.func @c69(%x: tensor<?x8xf32>, %g: tensor<8x16xbf16>, %u: tensor<16x8xbf16>, %d: tensor<8x16xbf16>) {
  // expected-error @+1 {{gate weight must have shape [16, 8], got 'tensor<8x16xbf16>'}}
  %0 = moe.shared_expert %x, %g, %u, %d : (tensor<?x8xf32>, tensor<8x16xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c70(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>, %u: tensor<16x8xbf16>, %d: tensor<8x16xbf16>, %s: tensor<8x1xbf16>) {
  // expected-error @+1 {{sigmoid_gate weight must have shape [1, 8], got 'tensor<8x1xbf16>'}}
  %0 = moe.shared_expert %x, %g, %u, %d sigmoid_gate %s : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<8x16xbf16>, tensor<8x1xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c71(%x: tensor<8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{input must be a rank-2 tensor, got 'tensor<8xf32>'}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false  : (tensor<8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c72(%x: tensor<?x8xf32>, %g: tensor<16xbf16>) {
  // expected-error @+1 {{weight must be a rank-2 tensor, got 'tensor<16xbf16>'}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false  : (tensor<?x8xf32>, tensor<16xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c73(%x: tensor<?x8xf32>, %g: tensor<16x4xbf16>) {
  // expected-error @+1 {{weight must have shape [*, 8], got 'tensor<16x4xbf16>'}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false  : (tensor<?x8xf32>, tensor<16x4xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c74(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{top_k 17 must lie in [1, 16] (the number of experts)}}
  %w, %i = moe.router %x, %g softmax greedy top_k 17 norm false  : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x17xf32>, tensor<?x17xi32>)
  return
}

// -----

func.func @c75(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{n_group 3 must be positive and divide the 16 experts}}
  %w, %i = moe.router %x, %g softmax group_limited_greedy top_k 2 norm false {n_group = 3 : i64} : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c76(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{topk_group 5 must lie in [1, 4] (n_group)}}
  %w, %i = moe.router %x, %g softmax group_limited_greedy top_k 2 norm false {n_group = 4 : i64, topk_group = 5 : i64} : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c77(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{topk_method greedy ignores groups; n_group must be 1, got 4}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false {n_group = 4 : i64} : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c78(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{top_k 5 exceeds the 4 experts in the kept topk_group 1 groups}}
  %w, %i = moe.router %x, %g softmax group_limited_greedy top_k 5 norm false {n_group = 4 : i64, topk_group = 1 : i64} : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x5xf32>, tensor<?x5xi32>)
  return
}

// -----

func.func @c79(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>, %b: tensor<16xf32>) {
  // expected-error @+1 {{topk_method noaux_tc scores a group by its two best experts; groups of 1 expert are too small}}
  %w, %i = moe.router %x, %g bias %b sigmoid noaux_tc top_k 2 norm true {n_group = 16 : i64, topk_group = 2 : i64} : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<16xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c80(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{routed_scaling_factor must be positive, got 0}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false {routed_scaling_factor = 0.0 : f64} : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c81(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{topk_method noaux_tc needs a correction bias}}
  %w, %i = moe.router %x, %g sigmoid noaux_tc top_k 2 norm true  : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c82(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>, %b: tensor<16xf32>) {
  // expected-error @+1 {{a correction bias needs topk_method noaux_tc, got greedy}}
  %w, %i = moe.router %x, %g bias %b softmax greedy top_k 2 norm false  : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<16xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c83(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias must have shape [16], got 'tensor<8xf32>'}}
  %w, %i = moe.router %x, %g bias %b sigmoid noaux_tc top_k 2 norm true  : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<8xf32>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c84(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{weights must have shape [*, 2], got 'tensor<?x3xf32>'}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false  : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x3xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c85(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{weights must hold floats, got 'tensor<?x2xi32>'}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false  : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xi32>, tensor<?x2xi32>)
  return
}

// -----

func.func @c86(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{indices must have shape [*, 2], got 'tensor<?x1xi32>'}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false  : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xf32>, tensor<?x1xi32>)
  return
}

// -----

func.func @c87(%x: tensor<?x8xf32>, %g: tensor<16x8xbf16>) {
  // expected-error @+1 {{indices must hold integers, got 'tensor<?x2xf32>'}}
  %w, %i = moe.router %x, %g softmax greedy top_k 2 norm false  : (tensor<?x8xf32>, tensor<16x8xbf16>) -> (tensor<?x2xf32>, tensor<?x2xf32>)
  return
}

// -----

func.func @c88(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{takes 3 expert weights (gate, up, down) or 2 (gate_up, down), got 1}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c89(%x: tensor<8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{input must be a rank-2 tensor, got 'tensor<8xf32>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<8xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c90(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<8x16xbf16>) {
  // expected-error @+1 {{down weight must be a rank-3 tensor, got 'tensor<8x16xbf16>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c91(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x9x16xbf16>) {
  // expected-error @+1 {{down weight must have shape [4, 8, 16], got 'tensor<4x9x16xbf16>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x9x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c92(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{gate_up weight must have shape [4, 32, 8], got 'tensor<4x16x8xbf16>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c93(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<3x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{gate weight must have shape [4, 16, 8], got 'tensor<3x16x8xbf16>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<3x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c94(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x8x16xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{up weight must have shape [4, 16, 8], got 'tensor<4x8x16xbf16>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c95(%x: tensor<?x8xf32>, %rw: tensor<?xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{routing weights must be a rank-2 tensor, got 'tensor<?xf32>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?xf32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c96(%x: tensor<?x8xf32>, %rw: tensor<?x2xi32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{routing weights must hold floats, got 'tensor<?x2xi32>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c97(%x: tensor<3x8xf32>, %rw: tensor<5x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{routing weights must have shape [3, 2], got 'tensor<5x2xf32>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<3x8xf32>, tensor<5x2xf32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<3x8xf32>
  return
}

// -----

func.func @c98(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x3xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{routing indices must have shape [*, 2], got 'tensor<?x3xi32>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x3xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c99(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xf32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{routing indices must hold integers, got 'tensor<?x2xf32>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x2xf32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c100(%x: tensor<?x8xf32>, %rw: tensor<?x5xf32>, %ri: tensor<?x5xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{routes each token to 5 experts but has only 4}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x5xf32>, tensor<?x5xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c101(%x: tensor<?x8xf32>, %rw: tensor<?x2xf32>, %ri: tensor<?x2xi32>, %w0: tensor<4x16x8xbf16>, %w1: tensor<4x16x8xbf16>, %w2: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{result must have shape [*, 8], got 'tensor<?x16xf32>'}}
  %0 = moe.experts %x routed(%rw, %ri) weights(%w0, %w1, %w2) : (tensor<?x8xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x16xf32>
  return
}

// -----

// expected-error @+1 {{'moe.model_type' must be a string, got 3 : i64}}
module attributes {moe.model_type = 3} {}

// -----

// expected-error @+1 {{unsupported 'moe.model_type' "llama"; expected one of mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3}}
module attributes {moe.model_type = "llama"} {}

// -----

// expected-error @+1 {{'moe.config' must be a dictionary, got "x"}}
module attributes {moe.config = "x"} {}

// -----

// expected-error @+1 {{unknown moe dialect attribute 'moe.other'}}
module attributes {moe.other = 1} {}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{weight 'w' has an empty 'concat' list}}
  %0 = moe.weight "w" concat [] : tensor<4x4xbf16>
  return
}

// -----

func.func @concat_scaled() {
  // expected-error @+1 {{block-scaled weight 'w' cannot be concatenated}}
  %0 = moe.weight "w" concat ["u"] scale "w_s" block [128, 128] : tensor<256x128xf8E4M3FN>
  return
}

// -----

func.func @concat_uneven() {
  // expected-error @+1 {{weight 'e.{e}.g' joins 2 tensors along dimension 1 of 'tensor<4x5x8xbf16>', which does not divide evenly}}
  %0 = moe.weight "e.{e}.g" concat ["e.{e}.u"] : tensor<4x5x8xbf16>
  return
}

// -----

func.func @concat_not_per_expert() {
  // expected-error @+1 {{concatenated tensor 'e.up' of weight 'e.{e}.g' must be per expert exactly when the weight is}}
  %0 = moe.weight "e.{e}.g" concat ["e.up"] : tensor<4x6x8xbf16>
  return
}

// -----

func.func @add_rms_norm_types(%a: tensor<?x8xf32>, %b: tensor<?x4xf32>) {
  %w = moe.weight "w" : tensor<8xbf16>
  // expected-error @+1 {{operands and results must have one type, got 'tensor<?x8xf32>', 'tensor<?x4xf32>' -> 'tensor<?x8xf32>', 'tensor<?x8xf32>'}}
  %s, %n = moe.add_rms_norm %a, %b, %w eps 1.0e-6 : (tensor<?x8xf32>, tensor<?x4xf32>, tensor<8xbf16>) -> (tensor<?x8xf32>, tensor<?x8xf32>)
  return
}

// -----

func.func @add_rms_norm_eps(%a: tensor<?x8xf32>) {
  %w = moe.weight "w" : tensor<8xbf16>
  // expected-error @+1 {{eps must be positive, got 0}}
  %s, %n = moe.add_rms_norm %a, %a, %w eps 0.0 : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xbf16>) -> (tensor<?x8xf32>, tensor<?x8xf32>)
  return
}

// -----

func.func @add_rms_norm_weight(%a: tensor<?x8xf32>) {
  %w = moe.weight "w" : tensor<4xbf16>
  // expected-error @+1 {{weight must have shape [8], got 'tensor<4xbf16>'}}
  %s, %n = moe.add_rms_norm %a, %a, %w eps 1.0e-6 : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<4xbf16>) -> (tensor<?x8xf32>, tensor<?x8xf32>)
  return
}

// -----

func.func @precision_unknown() {
  // expected-error @+1 {{invalid precision attribute specification: "int3"}}
  %0 = moe.weight "w" precision "int3" : tensor<4x4xbf16>
  return
}

// -----

func.func @precision_group_without_precision() {
  // expected-error @+1 {{weight 'w' has a 'group' but no precision}}
  %0 = moe.weight "w" group 4 : tensor<4x4xbf16>
  return
}

// -----

func.func @precision_int8_without_group() {
  // expected-error @+1 {{weight 'w' needs a 'group' exactly when its precision is int8, w8a8, int4, w4a8 or fp8}}
  %0 = moe.weight "w" precision int8 : tensor<4x4xbf16>
  return
}

// -----

func.func @precision_float_with_group() {
  // expected-error @+1 {{weight 'w' needs a 'group' exactly when its precision is int8, w8a8, int4, w4a8 or fp8}}
  %0 = moe.weight "w" precision bf16 group 4 : tensor<4x4xf32>
  return
}

// -----

func.func @precision_vector() {
  // expected-error @+1 {{only matrices are quantized; weight 'w' is 'tensor<4xbf16>'}}
  %0 = moe.weight "w" precision int8 group 4 : tensor<4xbf16>
  return
}

// -----

func.func @precision_group_too_large() {
  // expected-error @+1 {{group 8 of weight 'w' must be in [1, 4] (its row length)}}
  %0 = moe.weight "w" precision int8 group 8 : tensor<4x4xbf16>
  return
}

// -----

func.func @precision_w8a8_grouped() {
  // expected-error @+1 {{w8a8 weight 'w' needs one scale per row (group 8, its row length), got group 4}}
  %0 = moe.weight "w" precision w8a8 group 4 : tensor<4x8xbf16>
  return
}

// -----

func.func @precision_w8a8_without_group() {
  // expected-error @+1 {{weight 'w' needs a 'group' exactly when its precision is int8, w8a8, int4, w4a8 or fp8}}
  %0 = moe.weight "w" precision w8a8 : tensor<4x8xbf16>
  return
}

// -----

func.func @w8a8_mla_kv_b(%q: tensor<?x48xf32>, %kv: tensor<?x20xf32>, %p: tensor<?xi32>) {
  %n = moe.weight "kv_norm" : tensor<16xbf16>
  %b = moe.weight "kv_b" precision w8a8 group 16 : tensor<56x16xbf16>
  // expected-error @+1 {{'moe.mla_attention' op reads kv_b weight 'kv_b' as w8a8, which this op's kernel does not take (it quantizes no activations); store it int8}}
  %0 = moe.mla_attention %q, %kv, %n, %b positions %p layer 0 heads 4 kv_lora_rank 16 qk_dims(8, 4) v_dim 6 {softmax_scale = 0.25 : f64, rope_theta = 1.0e4 : f64} : (tensor<?x48xf32>, tensor<?x20xf32>, tensor<16xbf16>, tensor<56x16xbf16>, tensor<?xi32>) -> tensor<?x24xf32>
  return
}

// -----

func.func @precision_int4_odd_rows() {
  // expected-error @+1 {{int4 weight 'w' needs an even row length and group, got 'tensor<4x5xbf16>' and group 5}}
  %0 = moe.weight "w" precision int4 group 5 : tensor<4x5xbf16>
  return
}

// -----

func.func @precision_block_scaled() {
  // expected-error @+1 {{block-scaled weight 'w' keeps its checkpoint precision}}
  %0 = moe.weight "w" scale "s" block [128, 128] precision int8 group 4 : tensor<4x4xf8E4M3FN>
  return
}

// -----

func.func @stored_without_precision() {
  // expected-error @+1 {{weight 'w' is 'stored' but has no precision}}
  %0 = moe.weight "w" stored : tensor<4x4xf16>
  return
}

// -----

func.func @stored_fp8() {
  // expected-error @+1 {{weight 'w' is stored as fp8; only int4, w4a8, int8 and w8a8 come from a checkpoint as they are}}
  %0 = moe.weight "w" precision fp8 group 4 stored : tensor<4x4xf16>
  return
}

// -----

func.func @append_not_per_expert() {
  // expected-error @+1 {{weight 'w' may append whole experts (1 names each, fewer experts than it stacks) to an unscaled per-expert stack only}}
  %0 = moe.weight "w" append ["s"] : tensor<4x4xbf16>
  return
}

// -----

func.func @append_half_an_expert() {
  // expected-error @+1 {{weight 'e.{e}.g' may append whole experts (2 names each, fewer experts than it stacks) to an unscaled per-expert stack only}}
  %0 = moe.weight "e.{e}.g" concat ["e.{e}.u"] append ["s.g"] : tensor<3x8x4xbf16>
  return
}

// -----

func.func @append_per_expert_name() {
  // expected-error @+1 {{appended tensor 's.{e}' of weight 'e.{e}' names one tensor, not '{e}'}}
  %0 = moe.weight "e.{e}" append ["s.{e}"] : tensor<3x4x4xbf16>
  return
}

// -----

func.func @experts_all_shared(%x: tensor<?x4xf32>, %w: tensor<?x1xf32>, %i: tensor<?x1xi32>,
                              %gu: tensor<2x8x4xbf16>, %d: tensor<2x4x4xbf16>) -> tensor<?x4xf32> {
  // expected-error @+1 {{has 2 always-on experts of 2 stacked; at least one must be routed}}
  %0 = moe.experts %x routed(%w, %i) weights(%gu, %d) {shared = 2 : i64} : (tensor<?x4xf32>, tensor<?x1xf32>, tensor<?x1xi32>, tensor<2x8x4xbf16>, tensor<2x4x4xbf16>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// moe.dispatch, moe.expert_rows, moe.combine (moe-split-experts).

// -----

func.func @d_experts(%x: tensor<?x8xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{needs at least one routed expert and no negative count of always-on ones, got experts 0 shared 0}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 0 : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x2x8xf32>, tensor<?x2xi32>, tensor<?x2xi32>)
  return
}

// -----

func.func @d_shared(%x: tensor<?x8xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{needs at least one routed expert and no negative count of always-on ones, got experts 4 shared -1}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 4 shared -1 : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x1x8xf32>, tensor<?x1xi32>, tensor<?x1xi32>)
  return
}

// -----

func.func @d_input(%x: tensor<8xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{input must be a rank-2 tensor, got 'tensor<8xf32>'}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 4 : (tensor<8xf32>, tensor<?x2xi32>) -> (tensor<?x2x8xf32>, tensor<?x2xi32>, tensor<?x2xi32>)
  return
}

// -----

func.func @d_ids(%x: tensor<?x8xf32>, %i: tensor<?x2xf32>) {
  // expected-error @+1 {{routing indices must hold integers, got 'tensor<?x2xf32>'}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 4 : (tensor<?x8xf32>, tensor<?x2xf32>) -> (tensor<?x2x8xf32>, tensor<?x2xi32>, tensor<?x2xi32>)
  return
}

// -----

func.func @d_topk(%x: tensor<?x8xf32>, %i: tensor<?x3xi32>) {
  // expected-error @+1 {{routes each token to 3 experts but has only 2}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 2 : (tensor<?x8xf32>, tensor<?x3xi32>) -> (tensor<?x3x8xf32>, tensor<?x3xi32>, tensor<?x3xi32>)
  return
}

// -----

func.func @d_rows(%x: tensor<?x8xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{rows must have shape [*, 3, 8], got 'tensor<?x2x8xf32>'}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 4 shared 1 : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x2x8xf32>, tensor<?x3xi32>, tensor<?x3xi32>)
  return
}

// -----

func.func @d_rows_type(%x: tensor<?x8xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{rows must hold floats, got 'tensor<?x2x8xi32>'}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 4 : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x2x8xi32>, tensor<?x2xi32>, tensor<?x2xi32>)
  return
}

// -----

func.func @d_slots(%x: tensor<?x8xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{slots must hold integers, got 'tensor<?x2xf32>'}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 4 : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x2x8xf32>, tensor<?x2xf32>, tensor<?x2xi32>)
  return
}

// -----

func.func @d_map(%x: tensor<?x8xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{map must have shape [*, 2], got 'tensor<?x3xi32>'}}
  %r, %s, %m = moe.dispatch %x routed(%i) experts 4 : (tensor<?x8xf32>, tensor<?x2xi32>) -> (tensor<?x2x8xf32>, tensor<?x2xi32>, tensor<?x3xi32>)
  return
}

// -----

func.func @r_rank(%r: tensor<?x8xf32>, %s: tensor<?x3xi32>, %gu: tensor<4x32x8xbf16>, %d: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{rows must be a rank-3 tensor, got 'tensor<?x8xf32>'}}
  %y = moe.expert_rows %r slots(%s) weights(%gu, %d) : (tensor<?x8xf32>, tensor<?x3xi32>, tensor<4x32x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x3x8xf32>
  return
}

// -----

func.func @r_weights(%r: tensor<?x3x8xf32>, %s: tensor<?x3xi32>, %d: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{takes 3 expert weights (gate, up, down) or 2 (gate_up, down), got 1}}
  %y = moe.expert_rows %r slots(%s) weights(%d) : (tensor<?x3x8xf32>, tensor<?x3xi32>, tensor<4x8x16xbf16>) -> tensor<?x3x8xf32>
  return
}

// -----

func.func @r_hidden(%r: tensor<?x3x8xf32>, %s: tensor<?x3xi32>, %gu: tensor<4x32x8xbf16>, %d: tensor<4x9x16xbf16>) {
  // expected-error @+1 {{down weight must have shape [4, 8, 16], got 'tensor<4x9x16xbf16>'}}
  %y = moe.expert_rows %r slots(%s) weights(%gu, %d) : (tensor<?x3x8xf32>, tensor<?x3xi32>, tensor<4x32x8xbf16>, tensor<4x9x16xbf16>) -> tensor<?x3x8xf32>
  return
}

// -----

func.func @r_slots(%r: tensor<?x3x8xf32>, %s: tensor<?x2xi32>, %gu: tensor<4x32x8xbf16>, %d: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{slots must have shape [*, 3], got 'tensor<?x2xi32>'}}
  %y = moe.expert_rows %r slots(%s) weights(%gu, %d) : (tensor<?x3x8xf32>, tensor<?x2xi32>, tensor<4x32x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x3x8xf32>
  return
}

// -----

func.func @r_result(%r: tensor<?x3x8xf32>, %s: tensor<?x3xi32>, %gu: tensor<4x32x8xbf16>, %d: tensor<4x8x16xbf16>) {
  // expected-error @+1 {{result must have shape [*, 3, 8], got 'tensor<?x8xf32>'}}
  %y = moe.expert_rows %r slots(%s) weights(%gu, %d) : (tensor<?x3x8xf32>, tensor<?x3xi32>, tensor<4x32x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c_rank(%y: tensor<?x8xf32>, %m: tensor<?x3xi32>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{expert rows must be a rank-3 tensor, got 'tensor<?x8xf32>'}}
  %o = moe.combine %y map(%m) routed(%w, %i) : (tensor<?x8xf32>, tensor<?x3xi32>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c_map(%y: tensor<?x3x8xf32>, %m: tensor<?x3xf32>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{map must hold integers, got 'tensor<?x3xf32>'}}
  %o = moe.combine %y map(%m) routed(%w, %i) : (tensor<?x3x8xf32>, tensor<?x3xf32>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c_weights(%y: tensor<?x3x8xf32>, %m: tensor<?x3xi32>, %w: tensor<?x2xi32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{routing weights must hold floats, got 'tensor<?x2xi32>'}}
  %o = moe.combine %y map(%m) routed(%w, %i) : (tensor<?x3x8xf32>, tensor<?x3xi32>, tensor<?x2xi32>, tensor<?x2xi32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c_ids(%y: tensor<?x3x8xf32>, %m: tensor<?x3xi32>, %w: tensor<?x2xf32>, %i: tensor<?x3xi32>) {
  // expected-error @+1 {{routing indices must have shape [*, 2], got 'tensor<?x3xi32>'}}
  %o = moe.combine %y map(%m) routed(%w, %i) : (tensor<?x3x8xf32>, tensor<?x3xi32>, tensor<?x2xf32>, tensor<?x3xi32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c_picks(%y: tensor<?x2x8xf32>, %m: tensor<?x2xi32>, %w: tensor<?x3xf32>, %i: tensor<?x3xi32>) {
  // expected-error @+1 {{sums 2 rows per token, fewer than its 3 routed picks}}
  %o = moe.combine %y map(%m) routed(%w, %i) : (tensor<?x2x8xf32>, tensor<?x2xi32>, tensor<?x3xf32>, tensor<?x3xi32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @c_result(%y: tensor<?x3x8xf32>, %m: tensor<?x3xi32>, %w: tensor<?x2xf32>, %i: tensor<?x2xi32>) {
  // expected-error @+1 {{result must have shape [*, 8], got 'tensor<?x9xf32>'}}
  %o = moe.combine %y map(%m) routed(%w, %i) : (tensor<?x3x8xf32>, tensor<?x3xi32>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x9xf32>
  return
}

// -----

func.func @panels_quantized() {
  // expected-error @+1 {{weight 'w' of 'tensor<8x8xbf16>' stored as int8 is in panels, which needs an f32, bf16 or f16 matrix whose rows are a multiple of 8}}
  %0 = moe.weight "w" precision int8 group 8 panels : tensor<8x8xbf16>
  return
}

// -----

func.func @panels_partial() {
  // expected-error @+1 {{weight 'w.{e}' of 'tensor<2x12x8xbf16>' is in panels, which needs an f32, bf16 or f16 matrix whose rows are a multiple of 8}}
  %0 = moe.weight "w.{e}" panels : tensor<2x12x8xbf16>
  return
}

// -----

func.func @panels_vector() {
  // expected-error @+1 {{weight 'w' of 'tensor<16xf32>' is in panels, which needs an f32, bf16 or f16 matrix whose rows are a multiple of 8}}
  %0 = moe.weight "w" panels : tensor<16xf32>
  return
}

// -----

func.func @panels_block_scaled_fp8() {
  // expected-error @+1 {{weight 'w' of 'tensor<8x8xf8E4M3FN>' is in panels, which needs an f32, bf16 or f16 matrix whose rows are a multiple of 8}}
  %0 = moe.weight "w" scale "s" block [8, 8] panels : tensor<8x8xf8E4M3FN>
  return
}

// -----

// w4a8 sums blocks of 128 elements under one scale: groups start at
// multiples of 128 (a multiple of 128, or the whole row).
func.func @precision_w4a8_group_not_128() {
  // expected-error @+1 {{w4a8 weight 'w' needs a group that is a multiple of 128 or its row length (512), got group 64}}
  %0 = moe.weight "w" precision w4a8 group 64 : tensor<4x512xbf16>
  return
}

// -----

func.func @precision_w4a8_odd_row() {
  // expected-error @+1 {{w4a8 weight 'w' needs an even row length and group, got 'tensor<4x7xbf16>' and group 7}}
  %0 = moe.weight "w" precision w4a8 group 7 : tensor<4x7xbf16>
  return
}
