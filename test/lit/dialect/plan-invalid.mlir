// One case per verifier and parser error of the plan dialect
// (PlanDialect.cpp, PlanAttrs.td): plan.input index, plan.alloc dynamic
// dimensions and offset, plan.kv_cache kind and widths, plan.launch kernel
// name (Kernels.def), arity, KV-cache presence, parameters (missing, of
// another kernel, on a kernel without, misspelled, mistyped or missing
// field, unknown enum), stream and output buffers, plan.record and
// plan.wait streams and events, plan.weight slices. Each message quotes the
// offending value or type.
// RUN: moe-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

func.func @input_index() {
  // expected-error @+1 {{'plan.input' op index must be 0 (tokens) or 1 (positions), got 2}}
  %0 = plan.input 2 : memref<?xi32>
  return
}

// -----

func.func @input_negative_index() {
  // expected-error @+1 {{'plan.input' op index must be 0 (tokens) or 1 (positions), got -1}}
  %0 = plan.input -1 : memref<?xi32>
  return
}

// -----

func.func @alloc_dynamic_dim2() {
  // expected-error @+1 {{'plan.alloc' op only the token dimension (0, or 1 after a rank dimension) may be dynamic, got 'memref<4x4x?xf32>'}}
  %0 = plan.alloc : memref<4x4x?xf32>
  return
}

// -----

func.func @alloc_dynamic_dims01() {
  // expected-error @+1 {{'plan.alloc' op only the token dimension (0, or 1 after a rank dimension) may be dynamic, got 'memref<?x4x?xf32>'}}
  %0 = plan.alloc : memref<?x4x?xf32>
  return
}

// -----

func.func @alloc_negative_offset() {
  // expected-error @+1 {{'plan.alloc' op offset must be >= 0, got -64}}
  %0 = plan.alloc {offset = -64 : i64, size = 128 : i64} : memref<?x4xf32>
  return
}

// -----

func.func @kv_cache_kind() {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [gqa, mla]}}
  %0 = plan.kv_cache 0 mha k_width 16 v_width 16 : !plan.kv_cache
  return
}

// -----

func.func @kv_cache_k_width() {
  // expected-error @+1 {{'plan.kv_cache' op k_width and v_width must be positive, got 0 and 16}}
  %0 = plan.kv_cache 0 gqa k_width 0 v_width 16 : !plan.kv_cache
  return
}

// -----

func.func @kv_cache_v_width() {
  // expected-error @+1 {{'plan.kv_cache' op k_width and v_width must be positive, got 16 and -4}}
  %0 = plan.kv_cache 0 mla k_width 16 v_width -4 : !plan.kv_cache
  return
}

// -----

func.func @launch_unknown_kernel() {
  %x = plan.alloc : memref<?x4xf32>
  %y = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{unknown kernel 'gelu' (kernels: embedding, rms_norm, linear, add, silu_mul, sigmoid_gate, attention, mla_attention, router, experts, add_rms_norm, dispatch, expert_rows, combine)}}
  plan.launch gelu ins(%x : memref<?x4xf32>) outs(%y : memref<?x4xf32>)
  return
}

// -----

func.func @kernel_attr_unknown() {
  // expected-error @+1 {{unknown kernel 'softmax' (kernels:}}
  "test.op"() {k = #plan.kernel<softmax>} : () -> ()
  return
}

// -----

func.func @launch_params_missing() {
  %x = plan.alloc : memref<?x4xf32>
  %w = plan.weight "w" : memref<4xbf16>
  %y = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'rms_norm' needs parameters #plan.rms_norm<...>, got none}}
  plan.launch rms_norm ins(%x, %w : memref<?x4xf32>, memref<4xbf16>) outs(%y : memref<?x4xf32>)
  return
}

// -----

func.func @launch_params_of_another_kernel() {
  %x = plan.alloc : memref<?x4xf32>
  %w = plan.weight "w" : memref<4xbf16>
  %y = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'rms_norm' needs parameters #plan.rms_norm<...>, got #plan.experts<num_experts = 2, intermediate = 4, fused_gate_up = false, num_shared = 0, grouped = true>}}
  plan.launch rms_norm ins(%x, %w : memref<?x4xf32>, memref<4xbf16>) outs(%y : memref<?x4xf32>) params #plan.experts<num_experts = 2, intermediate = 4, fused_gate_up = false, num_shared = 0, grouped = true>
  return
}

// -----

func.func @launch_params_on_kernel_without() {
  %x = plan.alloc : memref<?x4xf32>
  %w = plan.weight "w" : memref<4x4xbf16>
  %y = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'linear' takes no parameters, got #plan.rms_norm<eps = 1.000000e-01 : f32>}}
  plan.launch linear ins(%x, %w : memref<?x4xf32>, memref<4x4xbf16>) outs(%y : memref<?x4xf32>) params #plan.rms_norm<eps = 0.1 : f32>
  return
}

// -----

func.func @params_misspelled_field() {
  // expected-error @+1 {{duplicate or unknown struct parameter name: epz}}
  "test.op"() {p = #plan.rms_norm<epz = 1.0e-6 : f32>} : () -> ()
  return
}

// -----

func.func @params_mistyped_field() {
  // expected-error @+2 {{invalid kind of attribute specified}}
  // expected-error @+1 {{failed to parse Plan_RmsNormParamsAttr parameter 'eps' which is to be a `::mlir::FloatAttr`}}
  "test.op"() {p = #plan.rms_norm<eps = 1>} : () -> ()
  return
}

// -----

func.func @params_missing_field() {
  // expected-error @+1 {{struct is missing required parameter: scoring}}
  "test.op"() {p = #plan.router<num_experts = 8, top_k = 2>} : () -> ()
  return
}

// -----

func.func @params_unknown_enum() {
  // expected-error @+2 {{expected ::mlir::moe::Scoring to be one of: softmax, sigmoid}}
  // expected-error @+1 {{failed to parse Plan_RouterParamsAttr parameter 'scoring' which is to be a `::mlir::moe::Scoring`}}
  "test.op"() {p = #plan.router<num_experts = 8, top_k = 2, scoring = relu, method = greedy, norm_topk_prob = false, n_group = 1, topk_group = 1, routed_scaling_factor = 1.0 : f32, layer = -1>} : () -> ()
  return
}

// -----

func.func @launch_stream_out_of_range() {
  %x = plan.alloc : memref<?x4xf32>
  %w = plan.weight "w" : memref<4x4xbf16>
  %y = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{'plan.launch' op stream must be in [0, 255], got 300}}
  plan.launch linear ins(%x, %w : memref<?x4xf32>, memref<4x4xbf16>) outs(%y : memref<?x4xf32>) {stream = 300 : i64}
  return
}


// -----

func.func @launch_too_few_inputs() {
  %x = plan.alloc : memref<?x4xf32>
  %y = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'linear' takes 2-3 inputs and 1 outputs, got 1 and 1}}
  plan.launch linear ins(%x : memref<?x4xf32>) outs(%y : memref<?x4xf32>)
  return
}

// -----

func.func @launch_too_many_inputs() {
  %x = plan.alloc : memref<?x4xf32>
  %y = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'add' takes 2-2 inputs and 1 outputs, got 3 and 1}}
  plan.launch add ins(%x, %x, %x : memref<?x4xf32>, memref<?x4xf32>, memref<?x4xf32>) outs(%y : memref<?x4xf32>)
  return
}

// -----

func.func @launch_wrong_outputs() {
  %x = plan.alloc : memref<?x4xf32>
  %w = plan.weight "gate.weight" : memref<8x4xbf16>
  %y = plan.alloc : memref<?x2xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'router' takes 2-3 inputs and 2 outputs, got 2 and 1}}
  plan.launch router ins(%x, %w : memref<?x4xf32>, memref<8x4xbf16>) outs(%y : memref<?x2xf32>)
  return
}

// -----

func.func @launch_attention_without_kv() {
  %q = plan.alloc : memref<?x8xf32>
  %p = plan.input 1 : memref<?xi32>
  %y = plan.alloc : memref<?x8xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'attention' needs KV-cache layer}}
  plan.launch attention ins(%q, %q, %q, %p : memref<?x8xf32>, memref<?x8xf32>, memref<?x8xf32>, memref<?xi32>) outs(%y : memref<?x8xf32>)
  return
}

// -----

func.func @launch_linear_with_kv() {
  %kv = plan.kv_cache 0 gqa k_width 4 v_width 4 : !plan.kv_cache
  %x = plan.alloc : memref<?x4xf32>
  %w = plan.weight "w" : memref<4x4xbf16>
  %y = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'linear' takes no KV-cache layer}}
  plan.launch linear ins(%x, %w : memref<?x4xf32>, memref<4x4xbf16>) outs(%y : memref<?x4xf32>) kv %kv
  return
}

// -----

func.func @launch_writes_weight() {
  %x = plan.alloc : memref<?x4xf32>
  %w = plan.weight "w" : memref<4x4xbf16>
  %y = plan.weight "y" : memref<4x4xf32>
  // expected-error @+1 {{'plan.launch' op writes a buffer that is not a plan.alloc}}
  plan.launch linear ins(%x, %w : memref<?x4xf32>, memref<4x4xbf16>) outs(%y : memref<4x4xf32>)
  return
}

// -----

func.func @launch_writes_input() {
  %t = plan.input 0 : memref<?xi32>
  %e = plan.weight "embed" : memref<16x4xbf16>
  %p = plan.input 1 : memref<?xi32>
  // expected-error @+1 {{'plan.launch' op writes a buffer that is not a plan.alloc}}
  plan.launch embedding ins(%t, %e : memref<?xi32>, memref<16x4xbf16>) outs(%p : memref<?xi32>)
  return
}

// -----

func.func @launch_writes_argument(%out: memref<?x4xf32>) {
  %x = plan.alloc : memref<?x4xf32>
  %w = plan.weight "w" : memref<4x4xbf16>
  // expected-error @+1 {{'plan.launch' op writes a buffer that is not a plan.alloc}}
  plan.launch linear ins(%x, %w : memref<?x4xf32>, memref<4x4xbf16>) outs(%out : memref<?x4xf32>)
  return
}

// -----

func.func @weight_scale_without_block() {
  // expected-error @+1 {{weight 'w' needs both 'scale' and 'block' or neither}}
  %0 = "plan.weight"() <{name = "w", scale = "s"}> : () -> memref<4x4xf8E4M3FN>
  return
}

// -----

func.func @weight_bad_block() {
  // expected-error @+1 {{block of weight 'w' must be two positive sizes}}
  %0 = plan.weight "w" scale "s" block [0, 128] : memref<4x4xf8E4M3FN>
  return
}

// -----

func.func @weight_concat_empty() {
  // expected-error @+1 {{'plan.weight' op weight 'w' may concatenate one or more unscaled tensors only}}
  %w = plan.weight "w" concat [] : memref<4x4xbf16>
  return
}

// -----

func.func @weight_i8_without_group() {
  // expected-error @+1 {{'plan.weight' op weight 'w' needs a 'group' exactly when it is i8, i4 or (without a checkpoint scale) f8E4M3FN, got 'memref<4x4xi8>'}}
  %w = plan.weight "w" : memref<4x4xi8>
  return
}

// -----

func.func @weight_float_with_group() {
  // expected-error @+1 {{'plan.weight' op weight 'w' needs a 'group' exactly when it is i8, i4 or (without a checkpoint scale) f8E4M3FN, got 'memref<4x4xbf16>'}}
  %w = plan.weight "w" group 4 : memref<4x4xbf16>
  return
}

// -----

func.func @weight_i4_odd_group() {
  // expected-error @+1 {{'plan.weight' op weight 'w' of 'memref<4x4xi4>' cannot have group 3}}
  %w = plan.weight "w" group 3 : memref<4x4xi4>
  return
}

// -----

func.func @weight_w8a8_grouped() {
  // expected-error @+1 {{'plan.weight' op weight 'w' of 'memref<4x8xi8>' has int8_activations, which needs i8 with one scale per row (w8a8: group = its row length) or i4 with groups starting at multiples of 128 (w4a8: group a multiple of 128 or the row length)}}
  %w = plan.weight "w" group 4 int8_activations : memref<4x8xi8>
  return
}

// -----

// i4 (w4a8) with one group a row, or groups of a multiple of 128, verify;
// a group of 64 in a row of 256 does not.
func.func @weight_w4a8_group_not_128() {
  %a = plan.weight "a" group 8 int8_activations : memref<4x8xi4>
  %b = plan.weight "b" group 128 int8_activations : memref<4x300xi4>
  // expected-error @+1 {{'plan.weight' op weight 'w' of 'memref<4x256xi4>' has int8_activations, which needs i8 with one scale per row (w8a8: group = its row length) or i4 with groups starting at multiples of 128 (w4a8: group a multiple of 128 or the row length)}}
  %w = plan.weight "w" group 64 int8_activations : memref<4x256xi4>
  return
}

// -----

func.func @weight_int8_activations_not_integer() {
  // expected-error @+1 {{'plan.weight' op weight 'w' of 'memref<4x8xf8E4M3FN>' has int8_activations, which needs i8 with one scale per row}}
  %w = plan.weight "w" group 8 int8_activations : memref<4x8xf8E4M3FN>
  return
}

// -----

func.func @record_stream_out_of_range() {
  // expected-error @+1 {{'plan.record' op stream must be in [0, 255], got -1}}
  %e = plan.record stream -1 : !plan.event
  return
}

// -----

func.func @wait_stream_out_of_range() {
  %e = plan.record stream 0 : !plan.event
  // expected-error @+1 {{'plan.wait' op stream must be in [0, 255], got 256}}
  plan.wait %e stream 256
  return
}

// -----

func.func @wait_same_stream() {
  %e = plan.record stream 3 : !plan.event
  // expected-error @+1 {{'plan.wait' op waits on stream 3 for an event of the same stream (program order already orders it)}}
  plan.wait %e stream 3
  return
}

// -----

func.func @wait_foreign_event(%e: !plan.event) {
  // expected-error @+1 {{'plan.wait' op waits for an event that no plan.record defines}}
  plan.wait %e stream 0
  return
}

// -----

func.func @dispatch_params_of_experts() {
  %x = plan.alloc : memref<?x4xf32>
  %i = plan.alloc : memref<?x2xi32>
  %r = plan.alloc : memref<?x2x4xf32>
  %s = plan.alloc : memref<?x2xi32>
  %m = plan.alloc : memref<?x2xi32>
  // expected-error @+1 {{'plan.launch' op kernel 'dispatch' needs parameters #plan.dispatch<...>, got #plan.experts<num_experts = 2, intermediate = 4, fused_gate_up = false, num_shared = 0, grouped = true>}}
  plan.launch dispatch ins(%x, %i : memref<?x4xf32>, memref<?x2xi32>) outs(%r, %s, %m : memref<?x2x4xf32>, memref<?x2xi32>, memref<?x2xi32>) params #plan.experts<num_experts = 2, intermediate = 4, fused_gate_up = false, num_shared = 0, grouped = true>
  return
}

// -----

func.func @combine_three_inputs() {
  %y = plan.alloc : memref<?x2x4xf32>
  %m = plan.alloc : memref<?x2xi32>
  %w = plan.alloc : memref<?x2xf32>
  %i = plan.alloc : memref<?x2xi32>
  %o = plan.alloc : memref<?x4xf32>
  // expected-error @+1 {{'plan.launch' op kernel 'combine' takes 4-4 inputs and 1 outputs, got 3 and 1}}
  plan.launch combine ins(%y, %m, %w : memref<?x2x4xf32>, memref<?x2xi32>, memref<?x2xf32>) outs(%o : memref<?x4xf32>)
  return
}

// -----

func.func @weight_slice_not_a_span() {
  // expected-error @+1 {{'plan.weight' op rows of weight 'w' must be [start, count] with start >= 0 and count >= 1}}
  %w = plan.weight "w" rows [0, 0] : memref<4x4xf32>
  return
}

// -----

func.func @weight_slice_rows_of_concat() {
  // Two concatenated tensors of 2 rows each make 4 rows, not 2.
  // expected-error @+1 {{'plan.weight' op weight 'gate' of 'memref<2x4xf32>' cannot hold 2 rows of each of its 2 tensors}}
  %w = plan.weight "gate" concat ["up"] rows [2, 2] : memref<2x4xf32>
  return
}

// -----

func.func @weight_slice_cols_of_vector() {
  // expected-error @+1 {{'plan.weight' op weight 'b' of 'memref<4xf32>' cannot hold 4 columns}}
  %w = plan.weight "b" cols [0, 4] : memref<4xf32>
  return
}

// -----

func.func @weight_slice_with_checkpoint_scales() {
  // expected-error @+1 {{'plan.weight' op weight 'w' carries the checkpoint's block scales and cannot be sliced}}
  %w = plan.weight "w" scale "w_scale" block [16, 16] cols [0, 16] : memref<32x16xf8E4M3FN>
  return
}

// -----

func.func @weight_panels_i8() {
  // expected-error @+1 {{'plan.weight' op weight 'w' of 'memref<8x8xi8>' is in panels, which needs an f32, bf16 or f16 matrix whose rows are a multiple of 8}}
  %w = plan.weight "w" group 8 panels : memref<8x8xi8>
  return
}

// -----

func.func @weight_panels_partial() {
  // expected-error @+1 {{'plan.weight' op weight 'w' of 'memref<12x8xbf16>' is in panels, which needs an f32, bf16 or f16 matrix whose rows are a multiple of 8}}
  %w = plan.weight "w" panels : memref<12x8xbf16>
  return
}

// -----

func.func @weight_panels_vector() {
  // expected-error @+1 {{'plan.weight' op weight 'w' of 'memref<16xf32>' is in panels, which needs an f32, bf16 or f16 matrix whose rows are a multiple of 8}}
  %w = plan.weight "w" panels : memref<16xf32>
  return
}
