//===- MoeOps.td - ops of the moe dialect -----------------------------------===//
//
// Shapes: T is the (dynamic) token count, H the hidden size, E the number of
// routed experts, K the router's top-k. Activations are ranked tensors; every
// weight is the result of a `moe.weight`. Verifiers live in MoeOps.cpp and
// quote the offending types and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_OPS_TD
#define MOE_OPS_TD

include "dialects/moe/MoeDialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

defvar Moe_Tensor = AnyRankedTensor;

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

def Moe_WeightOp : Moe_Op<"weight", [Pure]> {
  let summary = "a named checkpoint tensor";
  let description = [{
    Refers to a tensor of the checkpoint by name; its shape and dtype are in
    the result type, its data stays in the checkpoint. A name containing
    `{e}` stands for one tensor per expert (`{e}` replaced by 0, 1, ...),
    stacked along the leading dimension, which is the expert count.

    An `f8E4M3FN` weight carries its block scales: `scale` names the fp32
    tensor of inverse scales (one per `block` tile, DeepSeek-V3 layout).

    `concat` names more tensors of the same shape whose rows follow the
    first's (per expert, for `{e}` names): `moe-fuse-experts` joins an
    expert's gate and up projections this way, and the weight packer writes
    them side by side, so the fused weight is never materialised in memory.
    `append` (per-expert weights only) names whole tensors stacked after the
    `{e}` experts as further experts, one name per part (1 + the `concat`
    count) per appended expert: a shared expert folded into the routed stack.

    `precision` (set by `moe-assign-precision`) is how the plan stores the
    weight when it differs from the checkpoint: f32, bf16, symmetric
    int8/int4 with one f32 scale per `group` elements of each row (the last
    dimension), or fp8 (e4m3) with one f32 scale per `group` x `group`
    block; the plan writer converts while packing. `w8a8` is stored as int8
    with one scale per row (`group` is the row length), `w4a8` as int4 with
    a `group` that is a multiple of 128 or the row length; both tell the
    kernels that multiply by the weight to quantize their activations to
    int8 per token.

    `stored` marks a precision the checkpoint already holds: a GPTQ or AWQ
    layer's packed 4-bit integers and fp16 group scales (compiler/import/
    PackedInt4.h), read into the plan exactly: `int4` (q - 8, symmetric
    GPTQ) or `int8` (q - zero, zero points per group) in the checkpoint's
    group, or `w4a8`/`w8a8` (the same bytes; the kernels quantize their
    activations) where that group allows it. `moe-assign-precision` changes
    nothing else about it, since any other precision would round the
    checkpoint's values a second time.

    `panels` (set by `moe-assign-precision{weight-layout=panels}`) stores
    each matrix (the last two dimensions, a multiple of 8 rows) in panels of
    8 rows, element c of the 8 rows side by side, for the CPU kernels'
    vectors (docs/design-panel-gemm.md). Only an f32, bf16 or f16 weight as
    stored.

    ```mlir
    %0 = moe.weight "model.embed_tokens.weight" : tensor<32000x4096xbf16>
    %1 = moe.weight "model.layers.0.block_sparse_moe.experts.{e}.w1.weight"
           : tensor<8x14336x4096xbf16>
    %2 = moe.weight "model.layers.0.self_attn.q_a_proj.weight"
           scale "model.layers.0.self_attn.q_a_proj.weight_scale_inv"
           block [128, 128] : tensor<1536x7168xf8E4M3FN>
    %3 = moe.weight "model.layers.0.mlp.experts.{e}.gate_proj.weight"
           concat ["model.layers.0.mlp.experts.{e}.up_proj.weight"]
           : tensor<64x2816x2048xbf16>
    %4 = moe.weight "model.layers.0.mlp.experts.{e}.down_proj.weight"
           precision int4 group 128 : tensor<64x2048x1408xbf16>
    %5 = moe.weight "model.layers.0.mlp.experts.{e}.up_proj.weight"
           precision int4 group 128 stored : tensor<64x1408x2048xf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrArrayAttr>:$concat,
                       OptionalAttr<StrAttr>:$scale,
                       OptionalAttr<DenseI64ArrayAttr>:$block,
                       OptionalAttr<Moe_PrecisionAttr>:$precision,
                       OptionalAttr<I64Attr>:$group,
                       OptionalAttr<StrArrayAttr>:$append,
                       UnitAttr:$panels, UnitAttr:$stored);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $name (`concat` $concat^)? (`append` $append^)? (`scale` $scale^ `block` $block)?
    (`precision` $precision^)? (`group` $group^)? (`stored` $stored^)? (`panels` $panels^)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True when the name stands for one checkpoint tensor per expert.
    bool isPerExpert();
    /// True when `precision` is int8, w8a8, int4, w4a8 or fp8.
    bool isQuantized();
    /// The checks of `precision` and `group`.
    ::mlir::LogicalResult verifyPrecision();
    /// The checks of `panels`.
    ::mlir::LogicalResult verifyPanels();
    /// Checkpoint name of expert `e`'s tensor (or the name itself when the
    /// weight is not per expert); `pattern` is the name or the scale name.
    static std::string expand(llvm::StringRef pattern, int64_t e);
    /// The name and the `concat` names, in row order.
    llvm::SmallVector<llvm::StringRef> getParts();
    /// Shape of the block-scale tensor: ceil(dim / block) on the last two dims.
    llvm::SmallVector<int64_t> getScaleShape();
  }];
}

//===----------------------------------------------------------------------===//
// Token-wise ops
//===----------------------------------------------------------------------===//

def Moe_EmbeddingOp : Moe_Op<"embedding", [Pure]> {
  let summary = "token ids -> rows of the embedding table";
  let description = [{
    `ids: tensor<T x iN>`, `table: tensor<V x H>` -> `tensor<T x H>`.
  }];
  let arguments = (ins Moe_Tensor:$ids, Moe_Tensor:$table);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_RmsNormOp : Moe_Op<"rms_norm", [Pure]> {
  let summary = "x / sqrt(mean(x^2) + eps) * weight over the last dimension";
  let arguments = (ins Moe_Tensor:$input, Moe_Tensor:$weight, F64Attr:$eps);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_AddRmsNormOp : Moe_Op<"add_rms_norm", [Pure]> {
  let summary = "residual add fused with the RMSNorm that reads the sum";
  let description = [{
    `sum = lhs + rhs` and `normed = rms_norm(sum, weight, eps)` in one pass
    over the rows (`moe-fuse-experts` forms it from `moe.add` and
    `moe.rms_norm`; results equal theirs).
  }];
  let arguments = (ins Moe_Tensor:$lhs, Moe_Tensor:$rhs, Moe_Tensor:$weight, F64Attr:$eps);
  let results = (outs Moe_Tensor:$sum, Moe_Tensor:$normed);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $weight `eps` $eps attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_LinearOp : Moe_Op<"linear", [Pure]> {
  let summary = "y = x W^T (+ b)";
  let description = [{
    `x: tensor<T x K>`, `W: tensor<N x K>` (the Hugging Face `nn.Linear`
    layout), optional `b: tensor<N>` -> `tensor<T x N>`.
  }];
  let arguments = (ins Moe_Tensor:$input, Moe_Tensor:$weight,
                       Optional<Moe_Tensor>:$bias);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_AddOp : Moe_Op<"add", [Pure, Commutative]> {
  let summary = "element-wise sum (the residual connection)";
  let arguments = (ins Moe_Tensor:$lhs, Moe_Tensor:$rhs);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_LmHeadOp : Moe_Op<"lm_head", [Pure]> {
  let summary = "hidden states -> vocabulary logits";
  let description = [{
    `x: tensor<T x H>`, `W: tensor<V x H>` -> `tensor<T x V>`. With tied
    embeddings `W` is the embedding table.
  }];
  let arguments = (ins Moe_Tensor:$input, Moe_Tensor:$weight);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Moe_AttentionOp : Moe_Op<"attention"> {
  let summary = "causal grouped-query attention with RoPE over the KV cache";
  let description = [{
    Takes projected queries `tensor<T x heads*head_dim>`, keys and values
    `tensor<T x kv_heads*head_dim>` and token positions `tensor<T x iN>`;
    rotates q and k (half-rotation RoPE, `rope_theta`, optional
    `rope_scaling` as in config.json), appends k and v to cache slot
    `layer`, and attends causally (within `sliding_window` when set).
    `qk_norm(%qn, %kn)` applies RMSNorm over `head_dim` to each head of q and
    k before RoPE (Qwen3-MoE). Result: `tensor<T x heads*head_dim>`.
  }];
  let arguments = (ins Moe_Tensor:$q, Moe_Tensor:$k, Moe_Tensor:$v,
                       Moe_Tensor:$positions, Variadic<Moe_Tensor>:$qk_norm,
                       I64Attr:$layer, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, I64Attr:$head_dim,
                       F64Attr:$rope_theta,
                       OptionalAttr<DictionaryAttr>:$rope_scaling,
                       OptionalAttr<I64Attr>:$sliding_window,
                       DefaultValuedAttr<F64Attr, "1e-6">:$norm_eps);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v `positions` $positions (`qk_norm` `(` $qk_norm^ `)`)?
    `layer` $layer `heads` $num_heads `kv_heads` $num_kv_heads
    `head_dim` $head_dim attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_MlaAttentionOp : Moe_Op<"mla_attention"> {
  let summary = "DeepSeek multi-head latent attention over a latent KV cache";
  let description = [{
    `q: tensor<T x heads*(nope+rope)>` (already projected), `kv_a:
    tensor<T x kv_lora_rank+rope>` (output of `kv_a_proj_with_mqa`),
    `kv_norm: tensor<kv_lora_rank>` (`kv_a_layernorm`), `kv_b:
    tensor<heads*(nope+v_dim) x kv_lora_rank>` (`kv_b_proj`), positions.
    RoPE rotates interleaved pairs (dims 2i, 2i+1) of the rope part
    (`rope_interleave`, DeepSeek's default), or, without it, pairs (i, i + d/2)
    as `moe.attention` does. The cache of slot `layer` holds only the
    normalised latent and the one shared RoPE key per token. `softmax_scale` already includes the YaRN
    mscale correction. Result: `tensor<T x heads*v_dim>`.
  }];
  let arguments = (ins Moe_Tensor:$q, Moe_Tensor:$kv_a, Moe_Tensor:$kv_norm,
                       Moe_Tensor:$kv_b, Moe_Tensor:$positions,
                       I64Attr:$layer, I64Attr:$num_heads,
                       I64Attr:$kv_lora_rank, I64Attr:$qk_nope_head_dim,
                       I64Attr:$qk_rope_head_dim, I64Attr:$v_head_dim,
                       F64Attr:$softmax_scale, F64Attr:$rope_theta,
                       OptionalAttr<DictionaryAttr>:$rope_scaling,
                       DefaultValuedAttr<F64Attr, "1e-6">:$norm_eps,
                       DefaultValuedAttr<BoolAttr, "true">:$rope_interleave);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $q `,` $kv_a `,` $kv_norm `,` $kv_b `positions` $positions
    `layer` $layer `heads` $num_heads `kv_lora_rank` $kv_lora_rank
    `qk_dims` `(` $qk_nope_head_dim `,` $qk_rope_head_dim `)`
    `v_dim` $v_head_dim attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Feed-forward: dense MLP, router, routed experts, shared expert
//===----------------------------------------------------------------------===//

def Moe_SwigluMlpOp : Moe_Op<"swiglu_mlp", [Pure]> {
  let summary = "dense MLP: down(silu(gate x) * up x)";
  let description = [{
    `x: tensor<T x H>`, `gate, up: tensor<I x H>`, `down: tensor<H x I>`.
  }];
  let arguments = (ins Moe_Tensor:$input, Moe_Tensor:$gate, Moe_Tensor:$up,
                       Moe_Tensor:$down);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $gate `,` $up `,` $down attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_RouterOp : Moe_Op<"router", [Pure]> {
  let summary = "score experts, select top-k, weight the selection";
  let description = [{
    Scores `tensor<T x E>` = `scoring`(x W^T) in fp32 with `W: tensor<E x H>`.
    Selection by `topk_method`:
    - `greedy`: top-k of the scores;
    - `group_limited_greedy`: experts fall in `n_group` groups; a group's
      score is its best expert; keep the best `topk_group` groups, then top-k
      inside them (DeepSeek-V2);
    - `noaux_tc`: choose on scores + `bias` (the correction bias); a group's
      score is the sum of its two best biased scores (DeepSeek-V3).
    Weights come from the unbiased scores, divided by their sum when
    `norm_topk_prob`, then times `routed_scaling_factor`.
    Results: weights `tensor<T x K x f32>`, expert ids `tensor<T x K x i32>`.
    `layer` is the decoder layer it routes for (-1: not known), carried into
    the plan so that the runtime's routing statistics name their layer.
    `policy` (moe-set-routing) other than `token_choice` caps each expert's
    picks in a step at C = ceil(capacity_factor x T x K / E): `capacity`
    assigns pick ranks in turn (every token's first, then second, ...), a
    pick whose expert is full taking the token's next-best expert with
    room; `expert_choice` lets each expert take its C best-scoring tokens,
    a token keeping its K best offers and filling the rest with weight 0.
    Both depend on the step's tokens (greedy routers only).
  }];
  let arguments = (ins Moe_Tensor:$input, Moe_Tensor:$weight,
                       Optional<Moe_Tensor>:$bias,
                       Moe_ScoringAttr:$scoring, Moe_TopkMethodAttr:$topk_method,
                       I64Attr:$top_k, BoolAttr:$norm_topk_prob,
                       DefaultValuedAttr<I64Attr, "1">:$n_group,
                       DefaultValuedAttr<I64Attr, "1">:$topk_group,
                       DefaultValuedAttr<F64Attr, "1.0">:$routed_scaling_factor,
                       DefaultValuedAttr<I64Attr, "-1">:$layer,
                       DefaultValuedAttr<Moe_RoutingPolicyAttr,
                                         "::mlir::moe::RoutingPolicy::token_choice">:$policy,
                       DefaultValuedAttr<F64Attr, "1.0">:$capacity_factor);
  let results = (outs Moe_Tensor:$weights, Moe_Tensor:$indices);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? $scoring $topk_method `top_k` $top_k
    `norm` $norm_topk_prob attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_ExpertsOp : Moe_Op<"experts", [Pure]> {
  let summary = "routed SwiGLU experts, combined by the router's weights";
  let description = [{
    Each token goes through the K experts the router chose for it; their
    outputs are summed, each times its routing weight. Expert weights are
    stacked over E: either `(gate, up, down)` with `gate, up: tensor<E x I x H>`
    or `(gate_up, down)` with `gate_up: tensor<E x 2I x H>` (gate rows first),
    and `down: tensor<E x H x I>`. With `shared = S` the last S of the E
    stacked experts are always on: every token adds their outputs with weight
    1 after its routed ones (`moe-fuse-experts` folds DeepSeek's shared
    expert in this way); the router chooses among the first E - S.
    The schedule: with `grouped` (set by `moe-fuse-experts`) the slots are
    permuted so that each expert's tokens are contiguous and every expert's
    projections run as one grouped GEMM (then SwiGLU, the down projections
    as a second grouped GEMM, and a weighted combine); without it the
    experts run one after another, as the transformers loop over experts
    does. The result is the same, bit for bit.
  }];
  let arguments = (ins Moe_Tensor:$input, Moe_Tensor:$routing_weights,
                       Moe_Tensor:$routing_indices,
                       Variadic<Moe_Tensor>:$expert_weights,
                       OptionalAttr<I64Attr>:$shared, UnitAttr:$grouped);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $input `routed` `(` $routing_weights `,` $routing_indices `)`
    `weights` `(` $expert_weights `)` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True for the `(gate_up, down)` form.
    bool hasFusedGateUp() { return getExpertWeights().size() == 2; }
    mlir::Value getDown() { return getExpertWeights().back(); }
    /// Routed experts (the router's choices); the stacks hold these and
    /// getNumShared() always-on experts after them.
    int64_t getNumExperts();
    int64_t getNumShared() { return getShared() ? int64_t(*getShared()) : 0; }
  }];
}

//===----------------------------------------------------------------------===//
// moe.experts in three parts (moe-split-experts), so that an all-to-all can
// sit between them: P = K + S picks per token (K routed, S always-on).
//===----------------------------------------------------------------------===//

def Moe_DispatchOp : Moe_Op<"dispatch", [Pure]> {
  let summary = "permute each token's picks into rows grouped by expert";
  let description = [{
    `x: tensor<T x H>`, routed `ids: tensor<T x K x i32>` (of `experts`
    routed experts). Pick j of token t is `ids[t, j]` for j < K, else the
    always-on expert `experts + j - K` (S = `shared` of them). Results:
    `rows: tensor<T x P x H>` (viewed as T*P rows: each pick's token row,
    grouped by expert in ascending id, picks in (token, pick) order within
    an expert), `slots: tensor<T x P x i32>` (the expert of each row) and
    `map: tensor<T x P x i32>` (the row of each (token, pick)).
  }];
  let arguments = (ins Moe_Tensor:$input, Moe_Tensor:$routing_indices, I64Attr:$experts,
                       DefaultValuedAttr<I64Attr, "0">:$shared);
  let results = (outs Moe_Tensor:$rows, Moe_Tensor:$slots, Moe_Tensor:$map);
  let assemblyFormat = [{
    $input `routed` `(` $routing_indices `)` `experts` $experts (`shared` $shared^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_ExpertRowsOp : Moe_Op<"expert_rows", [Pure]> {
  let summary = "each row through the SwiGLU expert its slot names";
  let description = [{
    `rows: tensor<T x P x H>` viewed as T*P rows, in any order;
    `slots: tensor<T x P x i32>` the stacked expert of each row. Result row
    r = down_e(silu(gate_e rows[r]) * up_e rows[r]) with e = slots[r],
    unweighted. Weights as `moe.experts`'; `grouped` as there.
  }];
  let arguments = (ins Moe_Tensor:$rows, Moe_Tensor:$slots,
                       Variadic<Moe_Tensor>:$expert_weights, UnitAttr:$grouped);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $rows `slots` `(` $slots `)` `weights` `(` $expert_weights `)` attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool hasFusedGateUp() { return getExpertWeights().size() == 2; }
    mlir::Value getDown() { return getExpertWeights().back(); }
  }];
}

def Moe_CombineOp : Moe_Op<"combine", [Pure]> {
  let summary = "each token's expert rows, summed by its routing weights";
  let description = [{
    `y: tensor<T x P x H>` (expert rows), `map: tensor<T x P x i32>` (the
    row of each (token, pick), as `moe.dispatch` gives it), routing
    `weights: tensor<T x K>` and `ids: tensor<T x K x i32>`. Result
    `tensor<T x H>`: token t's routed picks in ascending expert id, each
    times its weight, then its P - K always-on picks with weight 1: the
    order `moe.experts` sums in, so the three parts give its bits.
  }];
  let arguments = (ins Moe_Tensor:$rows, Moe_Tensor:$map, Moe_Tensor:$routing_weights,
                       Moe_Tensor:$routing_indices);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $rows `map` `(` $map `)` `routed` `(` $routing_weights `,` $routing_indices `)` attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Moe_SharedExpertOp : Moe_Op<"shared_expert", [Pure]> {
  let summary = "always-on SwiGLU expert, optionally gated by sigmoid(x g^T)";
  let description = [{
    Like `moe.swiglu_mlp`; with `sigmoid_gate` (`tensor<1 x H>`, Qwen2-MoE's
    `shared_expert_gate`) the output is scaled per token by sigmoid(x g^T).
  }];
  let arguments = (ins Moe_Tensor:$input, Moe_Tensor:$gate, Moe_Tensor:$up,
                       Moe_Tensor:$down, Optional<Moe_Tensor>:$sigmoid_gate);
  let results = (outs Moe_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $gate `,` $up `,` $down (`sigmoid_gate` $sigmoid_gate^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MOE_OPS_TD
