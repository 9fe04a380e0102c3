//===- Passes.td - transformation passes ----------------------------------===//
#ifndef MOE_TRANSFORMS_PASSES_TD
#define MOE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseExpertsPass : Pass<"moe-fuse-experts", "mlir::ModuleOp"> {
  let summary = "Fuse expert projections and residual norms for the runtime";
  let description = [{
    On the `moe` dialect, before `moe-to-plan`:

    - Routed experts with separate gate and up stacks (`weights(%gate, %up,
      %down)`) get one `gate_up` stack: a `moe.weight` whose `concat` puts
      each expert's up rows after its gate rows, packed side by side by the
      plan writer. The experts kernel then runs one grouped GEMM of 2I rows
      per expert instead of two, reading each token row once.
    - `moe.add` feeding a `moe.rms_norm` becomes `moe.add_rms_norm` (both
      results: the residual sum and its norm), one pass over the rows.

    Router scoring, top-k and normalisation are already one `moe.router` op
    from the importer. The experts op itself is the permute + grouped GEMM +
    SwiGLU + grouped GEMM + weighted combine: the CPU kernel runs those
    stages on one scratch buffer. Outputs are unchanged (bit for bit on the
    CPU backend).

    Before:
    ```mlir
    %s = moe.add %a, %b : ...
    %n = moe.rms_norm %s, %w eps 1.0e-6 : ...
    %y = moe.experts %n routed(%rw, %ri) weights(%gate, %up, %down) : ...
    ```
    After:
    ```mlir
    %s, %n = moe.add_rms_norm %a, %b, %w eps 1.0e-6 : ...
    %gu = moe.weight "...experts.{e}.gate_proj.weight"
            concat ["...experts.{e}.up_proj.weight"] : tensor<E x 2I x H x bf16>
    %y = moe.experts %n routed(%rw, %ri) weights(%gu, %down) : ...
    ```
  }];
}

def SplitExpertsPass : Pass<"moe-split-experts", "mlir::ModuleOp"> {
  let summary = "Split each moe.experts into dispatch, expert rows and combine";
  let description = [{
    On the `moe` dialect, after `moe-fuse-experts` (it keeps the op's
    stacks and `grouped`): the permute and the weighted sum leave the
    experts op, so that expert parallelism can put an all-to-all between
    them (docs/parallelism.md). The three ops compute what the one did, in
    the same order: the plan gives the same bits. With P = K routed + S
    always-on picks per token:

    Before:
    ```mlir
    %y = moe.experts %x routed(%w, %ids) weights(%gu, %down) {shared = 1 : i64, grouped}
           : (tensor<?xH>, tensor<?xK>, tensor<?xKxi32>, ...) -> tensor<?xH>
    ```
    After:
    ```mlir
    %rows, %slots, %map = moe.dispatch %x routed(%ids) experts E shared 1
           : (...) -> (tensor<?xPxH>, tensor<?xPxi32>, tensor<?xPxi32>)
    %r = moe.expert_rows %rows slots(%slots) weights(%gu, %down) {grouped}
           : (...) -> tensor<?xPxH>
    %y = moe.combine %r map(%map) routed(%w, %ids) : (...) -> tensor<?xH>
    ```
    An experts op whose top-k is not static is left as it is (the row
    count per token must be known).
  }];
}

def AssignPrecisionPass : Pass<"moe-assign-precision", "mlir::ModuleOp"> {
  let summary =
      "Choose how the plan stores each weight (f32, bf16, int8, w8a8, fp8, int4, w4a8; rows or panels)";
  let description = [{
    Sets `precision` (and for int8/w8a8/int4/w4a8/fp8 `group`) on every
    `moe.weight` the policy changes; the plan writer converts while packing.
    Components, from how a weight is used: `embedding` (table), `lm_head`, `router`,
    `experts` (routed), `shared_expert`, `dense_mlp` (SwiGLU MLP layers),
    `attention` (the `moe.linear` projections and MLA's `kv_b`). Those are
    matrices the runtime multiplies by (or looks rows up in) and may be
    quantized; any other weight (norms, biases, the shared-expert gate
    vector) is a `vector` and stays float. A weight used by two components (tied
    embedding and LM head) gets the more precise of their choices, in the
    order f32, bf16, int8, w8a8, fp8, int4, w4a8, except that an int8 (int4)
    embedding lookup goes with a w8a8 (w4a8) LM head as w8a8 (w4a8): the
    lookup reads the same rows.

    Policies:
    - `keep` (default): the checkpoint's dtypes.
    - `fp32`, `bf16`: every weight in that type.
    - `int8`: every matrix int8, symmetric, one f32 scale per output row.
    - `w8a8`: stored as `int8`, and the kernels that multiply by the weight
      quantize each activation row to int8 (one scale per token) and sum in
      integers (plan `Tensor.int8_activations`). Every matrix the runtime
      multiplies through linear()/linearGroup()/experts(): routed and shared
      experts, dense MLPs, the `moe.linear` projections, the LM head. The
      router gets plain int8 (f32 activations): its logits choose the
      experts, where an activation rounding error flips near ties and
      changes which experts run, and its E x H matrix is too small for w8a8
      to save time; `overrides=router=w8a8` is accepted (the router kernel
      multiplies through linear()). MLA's `kv_b` (read by the MLA attention
      kernel, which does not quantize activations) and the embedding table
      (a row lookup) get int8. A tied embedding/LM head is w8a8: its lookup
      reads the same int8 rows and multiplies nothing.
    - `int4`: every matrix int4, symmetric, one f32 scale per `int4-group`
      elements of a row (the whole row when it is shorter); a matrix with an
      odd row length gets int8.
    - `w4a8`: stored as `int4`, and the kernels that multiply by the weight
      quantize each activation row to int8 and sum in integers, in blocks
      of 128 elements (kernels/cpu/Kernels.h), as `w8a8` does for int8:
      every matrix multiplied through linear()/linearGroup()/experts(). The
      router gets plain int4 (the `int4` policy's), MLA's `kv_b` and the
      embedding table int4; a tied embedding/LM head is w4a8. `int4-group`
      must be a multiple of 128; a matrix with an odd row length gets w8a8.
    - `fp8`: every matrix fp8 e4m3, one f32 scale per `fp8-block` square block
      (smaller when the matrix is).
    - `seed`: router f32, shared experts int8, routed experts fp8, embedding
      int8, LM head bf16; the rest as stored.
    `overrides` (`component=precision`, precision one of keep, f32, bf16,
    int8, w8a8, fp8, int4, w4a8) change single components on top of the
    policy: what `moe-compile --precision=auto` passes after its calibration
    search. `embedding=w8a8` and `embedding=w4a8` are refused (a row lookup
    multiplies nothing); with `attention=w8a8` (`w4a8`) MLA's `kv_b` gets
    int8 (int4), as under the policy.
    Block-scaled fp8 checkpoint weights keep their precision. So do `stored`
    weights (GPTQ and AWQ checkpoints), except that a policy giving their
    component `w4a8` makes a stored int4 weight w4a8 where its group is a
    multiple of 128 or the whole row, and `w8a8` a stored int8 weight whose
    group is the whole row: the same bytes, read with int8 activations.

    `weight-layout=panels` then sets `panels` on every weight stored as f32,
    bf16 or f16 whose matrices have a multiple of 8 rows, that the kernels
    multiplying through linear()/linearGroup()/experts() read (attention
    projections, dense and shared MLPs, routed experts, the router, the LM
    head) and nothing else but an embedding lookup: the CPU kernels read 8
    rows' element c as one vector (docs/design-panel-gemm.md), and the
    lookup of a table tied to the LM head gathers each row from its panel.
    An untied embedding table, MLA's `kv_b` and vectors stay rows. `rows`
    (default) sets none.

    ```mlir
    %w = moe.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
    ```
    becomes with `policy=int8`
    ```mlir
    %w = moe.weight "model.layers.0.self_attn.q_proj.weight" precision int8 group 64
           : tensor<64x64xbf16>
    ```
    and with `policy=w8a8`
    ```mlir
    %w = moe.weight "model.layers.0.self_attn.q_proj.weight" precision w8a8 group 64
           : tensor<64x64xbf16>
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"keep\"",
           "keep, fp32, bf16, int8, w8a8, fp8, int4, w4a8 or seed">,
    ListOption<"overrides", "overrides", "std::string",
               "component=precision entries applied on top of the policy">,
    Option<"int4Group", "int4-group", "int64_t", "128",
           "int4: elements per scale along a row">,
    Option<"fp8Block", "fp8-block", "int64_t", "128",
           "fp8: rows and columns per scale block">,
    Option<"weightLayout", "weight-layout", "std::string", "\"rows\"",
           "rows or panels (matrices the CPU kernels multiply, in panels of 8 rows)">
  ];
}

def AssignStreamsPass : Pass<"moe-assign-streams", "mlir::ModuleOp"> {
  let summary = "Put launches on streams round-robin, with the events they need";
  let description = [{
    On the `plan` dialect, before `moe-plan-memory`: launch i goes to stream
    i mod `streams`, the output stays on stream 0, and before each op that
    touches a buffer (or KV-cache layer) another stream used, one of them
    writing, a `plan.record` on that stream and a `plan.wait` on this one
    order them, unless an earlier event already does (vector clocks). The
    result passes `moe-verify-schedule` and computes what the one-stream
    program computes. It exercises multi-stream plans end to end; choosing
    streams by cost is the overlap scheduling pass's job. A function that
    already uses streams is refused.

    ```mlir
    plan.launch linear ins(%x, %w : ...) outs(%a : ...)
    %e = plan.record stream 0 : !plan.event
    plan.wait %e stream 1
    plan.launch add ins(%a, %a : ...) outs(%b : ...) {stream = 1 : i64}
    ```
  }];
  let options = [
    Option<"streams", "streams", "int64_t", "2", "how many streams, in [1, 256]">
  ];
}

def ScheduleOverlapPass : Pass<"moe-schedule-overlap", "mlir::ModuleOp"> {
  let summary = "Split each step into micro-batches whose collectives overlap the others' compute";
  let description = [{
    On the `plan` dialect, after the sharding passes and before
    `moe-plan-memory`. `policy=two-batch`: every launch and collective is
    cloned per micro-batch on `plan.rows` views of its token-led buffers
    (`micro-batches` parts of the step's rows); launches go to stream 0,
    collectives to stream 1. The program is cut after each collective into
    segments, and each segment runs part 0, then part 1, ...: while part
    k's collective runs on stream 1, part k + 1's computation runs on
    stream 0 (DeepSeek's and SGLang's two-batch overlap). The events are
    those the memory effects need (vector clocks, as moe-assign-streams).
    Every kernel is batch-invariant, so the logits do not change.
    `policy=none` leaves the program as it is. Choosing by prediction is
    `moe-compile --overlap auto`: it writes each candidate plan and
    simulates it on a hardware profile (`moe-plan simulate`).

    Refused by name: routing that depends on the whole step (capacity,
    expert choice), the row exchange of data-parallel attention
    (all_to_all_v) and all_gather, and a function that already uses
    streams or row views.

    ```mlir
    %y0 = plan.rows %y part 0 of 2 : memref<?x3x32xf32>
    plan.launch expert_rows ins(...) outs(%y0 : memref<?x3x32xf32>)
    %e = plan.record stream 0 : !plan.event
    plan.wait %e stream 1
    plan.collective all_reduce ins(%y0 : ...) outs(%y0 : ...) {stream = 1 : i64}
    plan.launch expert_rows ins(...) outs(%y1 : memref<?x3x32xf32>)
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"none\"", "none or two-batch">,
    Option<"microBatches", "micro-batches", "int64_t", "2",
           "parts a step's tokens are split into, in [2, 16]">
  ];
}

def ReplicateRanksPass : Pass<"moe-replicate-ranks", "mlir::ModuleOp"> {
  let summary = "One copy of the plan program per rank (data parallelism)";
  let description = [{
    On the `plan` dialect, before `moe-plan-memory`: `@main` becomes
    `ranks` functions `@rank0` .. `@rank<n-1>`, each marked `plan.rank`,
    each holding every weight: rank r runs the whole model on the sequences
    given to it. The plan writer gives each rank its own weight file, and
    the expert placement lists every rank's copy of each expert. It is the
    simplest multi-rank plan; sharding experts and heads over ranks is the
    job of the expert- and tensor-parallel passes.

    ```mlir
    func.func @rank0() attributes {plan.rank = 0 : i64} { ... }
    func.func @rank1() attributes {plan.rank = 1 : i64} { ... }
    ```
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "1", "how many ranks, in [1, 4096]">
  ];
}

def SetRoutingPass : Pass<"moe-set-routing", "mlir::ModuleOp"> {
  let summary = "Choose how each router assigns a step's tokens to experts";
  let description = [{
    On the `moe` dialect: sets `policy` and `capacity_factor` on every
    `moe.router` (see its description). `token_choice` is the checkpoint's
    own routing; `capacity` (token choice, each expert capped at
    capacity-factor x its even share of the step's picks, overflow to the
    token's next-best expert with room) and `expert_choice` (each expert
    takes its capacity-factor x even share of the step's tokens) are the
    alternatives the field uses to bound expert load. Both make a token's
    routing depend on the other tokens of its step, so batched runs no longer
    equal solo runs; docs/parallelism.md measures what they cost in quality.
    Greedy routers only (Mixtral, Qwen); DeepSeek's group-limited routers
    are refused.

    ```mlir
    %w, %i = moe.router %x, %gate softmax greedy top_k 2 norm true
               {capacity_factor = 1.250000e+00 : f64, layer = 0 : i64, policy = 2 : i32} : ...
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"token_choice\"",
           "token_choice, capacity or expert_choice">,
    Option<"capacityFactor", "capacity-factor", "double", "1.0",
           "each expert's capacity in even shares of the step's picks, in [1, 64]">
  ];
}

def ShardExpertsPass : Pass<"moe-shard-experts", "mlir::ModuleOp"> {
  let summary = "Partition each layer's experts over the ranks (expert parallelism)";
  let description = [{
    On the `plan` dialect, after `moe-replicate-ranks` (every rank runs the
    same tokens) and before `moe-plan-memory`, on plans whose experts are
    split (`moe-split-experts`): rank r of N keeps experts
    [E r / N, E (r + 1) / N) of each layer's E stacked experts (the routed
    ones, then the always-on ones), so that its weight file holds only
    those; its `expert_rows` computes their rows and writes zeros for the
    others, and an `all_reduce` of the rows gives every rank every row
    before `combine`. Each row comes from exactly one rank and the others
    add exact zeros, so the tokens are the single-rank plan's, bit for bit.
    The plan's placement table lists each expert on its rank.

    With `dp-attention` the ranks hold different tokens (data-parallel
    attention, as DeepSeek deploys V3): instead of the all_reduce, an
    `all_to_all_v` sends each dispatched row and its slot to the rank that
    holds its expert, `expert_rows` computes the rows it received, and a
    second `all_to_all_v` returns them to their places before `combine`.
    Each row is still computed once, by the same kernel, and combined in
    the same order: the tokens are again the single-rank plan's.

    ```mlir
    %gu = plan.weight "...experts.{e}.gate_proj.weight" concat [...] experts [4, 5, 6, 7] of 8
            : memref<4x32x32xbf16>
    plan.launch expert_rows ins(%rows, %slots, %gu, %down : ...) outs(%y : memref<?x2x32xf32>)
      params #plan.experts<num_experts = 4, ..., stacked = 8, held = [4, 5, 6, 7], layer = 1>
    plan.collective all_reduce ins(%y : memref<?x2x32xf32>) outs(%y : memref<?x2x32xf32>)
    ```

    With `dp-attention` (2 ranks):

    ```mlir
    plan.collective all_to_all_v ins(%rows, %slots : memref<?x2x32xf32>, memref<?x2xi32>)
        outs(%in, %inSlots : memref<?x4x32xf32>, memref<?x4xi32>)
    plan.launch expert_rows ins(%in, %inSlots, %gu, %down : ...) outs(%out : memref<?x4x32xf32>) ...
    plan.collective all_to_all_v ins(%out : memref<?x4x32xf32>) outs(%y : memref<?x2x32xf32>)
    ```
  }];
  let options = [
    Option<"ep", "ep", "int64_t", "1", "expert-parallel ranks: the module's rank programs">,
    Option<"dpAttention", "dp-attention", "bool", "false",
           "the ranks hold different tokens: exchange rows with all_to_all_v instead of "
           "completing them with an all_reduce">
  ];
}

def PlaceExpertsPass : Pass<"moe-place-experts", "mlir::ModuleOp"> {
  let summary = "Place each layer's experts on the ranks as planned from a routing profile";
  let description = [{
    As `moe-shard-experts` (after `moe-replicate-ranks`, before
    `moe-plan-memory`), but each layer's routed experts go where
    `compiler/placement` plans them from the routing profile's counts
    (docs/parallelism.md): the `redundant` extra slots replicate the
    hottest experts, and physical experts are packed onto nodes of
    `ranks-per-node` ranks, then ranks, to even out the most loaded rank;
    every rank holds (E + redundant) / ranks routed experts. The always-on
    experts are on every rank. A replicated expert's rows are shared
    round-robin among its replicas (`replicas` and `replica` in the
    launch's params), so each row is still computed once, with the same
    bits: the tokens are the single-rank plan's. The plan writer lists
    every replica in the placement table. With `dp-attention` the ranks
    hold different tokens and exchange rows with `all_to_all_v` (as
    `moe-shard-experts{dp-attention}`): the runtime sends each row to a
    replica of its expert, the rank's own when it holds one (the always-on
    experts stay local), else one chosen by the row's token, and a replica
    computes every row it receives.

    ```mlir
    plan.launch expert_rows ins(...) outs(%y : memref<?x3x32xf32>)
      params #plan.experts<num_experts = 3, ..., stacked = 5, held = [2, 0, 4],
                           replicas = [2, 1, 2], replica = [0, 0, 0], layer = 1>
    plan.collective all_reduce ins(%y : memref<?x3x32xf32>) outs(%y : memref<?x3x32xf32>)
    ```
  }];
  let options = [
    Option<"profile", "profile", "std::string", "\"\"",
           "the routing profile (moe-run --routing-profile) to plan from">,
    Option<"ranks", "ranks", "int64_t", "1", "ranks: the module's rank programs">,
    Option<"ranksPerNode", "ranks-per-node", "int64_t", "0",
           "ranks per node (0: all on one node)">,
    Option<"redundant", "redundant", "int64_t", "0",
           "slots beyond one per routed expert, for replicas of the hottest">,
    Option<"dpAttention", "dp-attention", "bool", "false",
           "the ranks hold different tokens: exchange rows with all_to_all_v instead of "
           "completing them with an all_reduce">
  ];
}

def ShardTensorsPass : Pass<"moe-shard-tensors", "mlir::ModuleOp"> {
  let summary = "Split attention heads, dense MLPs and experts' columns over the ranks (tensor parallelism)";
  let description = [{
    On the `plan` dialect, after `moe-replicate-ranks` (every rank runs the
    same tokens) and any expert sharding, before `moe-plan-memory`. The
    module's N rank programs form N / tp tensor-parallel groups of `tp`
    consecutive ranks ({0 .. tp-1}, {tp .. 2 tp - 1}, ...); with N = tp,
    one. Rank r is member r' = r mod tp of its group, and keeps:

    - **attention** (`attention`, `mla_attention`): heads
      [H r' / tp, H (r' + 1) / tp). The q projection (and k, v: the key-value
      heads those query heads read, shared by two ranks when there are
      fewer key-value heads than ranks) keeps its heads' rows, MLA's
      `kv_b_proj` its heads' rows, the KV cache its key-value heads; the
      output projection keeps the matching columns;
    - **dense and shared MLPs** (`linear`, `linear`, `silu_mul`, `linear`):
      intermediate columns [I r' / tp, I (r' + 1) / tp) of gate and up (rows)
      and of down (columns);
    - **experts** not sharded by expert parallelism (`experts`,
      `expert_rows`): the same share of every expert's intermediate.

    Each output projection then holds a partial sum, completed by a
    `plan.collective all_reduce` among its group (`#plan.group<tensor,
    [...]>` when there are several groups; expert parallelism's all-reduces
    stay on every rank); a bias of such a projection stays on the group's
    first rank only. Embeddings, norms, routers and the LM head stay whole on every
    rank. The weights are `plan.weight ... rows [start, count]` / `cols
    [start, count]` slices, so each rank's weight file holds its share.
    The all-reduces add in another order than one rank does: the logits
    agree to rounding, not bit for bit.

    ```mlir
    %q = plan.weight "model.layers.0.self_attn.q_proj.weight" rows [32, 32] : memref<32x64xf32>
    ...
    plan.launch attention ins(%qb, %kb, %vb, %pos : ...) outs(%a : memref<?x32xf32>) kv %kv
      params #plan.attention<layer = 0, num_heads = 2, num_kv_heads = 1, head_dim = 16, ...>
    %o = plan.weight "model.layers.0.self_attn.o_proj.weight" cols [32, 32] : memref<64x32xf32>
    plan.launch linear ins(%a, %o : ...) outs(%y : memref<?x64xf32>)
    plan.collective all_reduce ins(%y : memref<?x64xf32>) outs(%y : memref<?x64xf32>)
    ```
  }];
  let options = [
    Option<"tp", "tp", "int64_t", "1",
           "ranks per tensor-parallel group: the module's rank programs or a divisor">
  ];
}

def VerifySchedulePass : Pass<"moe-verify-schedule", "mlir::ModuleOp"> {
  let summary = "Refuse plans in which two streams race on a buffer";
  let description = [{
    On the `plan` dialect: launches of one stream are ordered by program
    order, launches of different streams only by a `plan.record` on one and
    a `plan.wait` for it on the other. Two launches (or a launch and the
    output) on different streams that touch the same buffer, or buffers
    whose arena bytes overlap, at least one of them writing, must be ordered
    so; otherwise the pass fails with a diagnostic naming both ops. The plan
    loader runs the same check (moe/abi/Schedule.h). A one-stream plan
    always passes.

    ```mlir
    plan.launch linear ins(%x, %w : ...) outs(%a : ...) {stream = 1 : i64}
    %e = plan.record stream 1 : !plan.event
    plan.wait %e stream 0       // without this: refused
    plan.launch add ins(%a, %b : ...) outs(%c : ...)
    ```
  }];
}

def PlanMemoryPass : Pass<"moe-plan-memory", "mlir::ModuleOp"> {
  let summary = "Assign arena offsets to plan buffers from their lifetimes";
  let description = [{
    Each `plan.alloc` lives from the first launch that touches it to the last
    (the program's output to the end). Buffers are placed first-fit, in order
    of their first use, into a single arena, 64-byte aligned, sized for
    `max-batch-tokens` rows; buffers whose lifetimes do not overlap share
    bytes. With more than one stream, program order is not enough: a later
    buffer takes an earlier one's bytes only if every access to the earlier
    one is ordered before every access to the later by streams and events
    (`plan.record`/`plan.wait`), so a stream still running cannot see its
    bytes overwritten. The module records `plan.max_batch_tokens`; each function (a rank's
    program, with an arena of its own) its `plan.arena_bytes` (its peak
    activation memory).

    Before:
    ```mlir
    %a = plan.alloc : memref<?x32xf32>
    ```
    After (`max-batch-tokens=4`):
    ```mlir
    %a = plan.alloc {offset = 0 : i64, size = 512 : i64} : memref<?x32xf32>
    ```
  }];
  let options = [
    Option<"maxBatchTokens", "max-batch-tokens", "int64_t", "256",
           "most tokens one run processes (sizes the arena)">
  ];
}

#endif
