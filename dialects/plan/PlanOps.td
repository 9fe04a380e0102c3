//===- PlanOps.td - ops of the plan dialect -------------------------------===//
#ifndef PLAN_OPS_TD
#define PLAN_OPS_TD

include "dialects/plan/PlanDialect.td"
include "dialects/plan/PlanAttrs.td"
include "dialects/plan/PlanEnums.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Plan_WeightOp : Plan_Op<"weight", [Pure]> {
  let summary = "a named checkpoint tensor, packed into the plan's weight file";
  let description = [{
    As `moe.weight`: `{e}` in the name stands for one tensor per expert,
    stacked along dimension 0; `concat` names tensors whose rows follow the
    first's (per expert); `append` names tensors stacked after the experts
    as further experts (as on `moe.weight`). The element type is how the plan stores it, which
    the plan writer converts to from the checkpoint's; i8 and i4 are
    symmetric integers with one f32 scale per `group` elements of each row,
    f8E4M3FN without `scale` has one per `group` x `group` block.
    `int8_activations` (W8A8: an i8 weight with one scale per row, `group`
    its row length; W4A8: an i4 weight whose `group` is a multiple of 128 or
    its row length) tells the kernels that multiply by it to quantize each
    activation row to int8 and sum in integers; only the linear, router,
    experts and expert_rows kernels take it, and the embedding lookup of a
    tied table, which multiplies nothing (checked by the plan loader).
    `panels` stores each matrix (the last two dimensions: f32, bf16 or f16,
    a multiple of 8 rows) in panels of 8 rows (plan `Layout.Panels8`); only
    the linear, router, experts, expert_rows and embedding kernels take it.
    `experts [e0, e1, ...] of S` (expert parallelism): of the S experts
    the names stack, only e0, e1, ... in that order (dim 0 of the result).
    `rows [start, count]` and `cols [start, count]` (tensor parallelism):
    of each named matrix (per expert), only those rows and columns; of a
    vector, `rows` are its elements. A quantized slice is encoded as a
    matrix of its own (its scales are the slice's).

    ```mlir
    %0 = plan.weight "model.embed_tokens.weight" : memref<96x32xbf16>
    %1 = plan.weight "model.layers.0.self_attn.q_proj.weight" group 32 : memref<32x32xi8>
    %2 = plan.weight "model.layers.0.self_attn.o_proj.weight" cols [16, 16] : memref<32x16xf32>
    %3 = plan.weight "model.layers.0.mlp.down_proj.weight" group 40 int8_activations
           : memref<32x40xi8>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrArrayAttr>:$concat,
                       OptionalAttr<StrAttr>:$scale,
                       OptionalAttr<DenseI64ArrayAttr>:$block,
                       OptionalAttr<I64Attr>:$group,
                       OptionalAttr<StrArrayAttr>:$append,
                       OptionalAttr<DenseI64ArrayAttr>:$experts,
                       OptionalAttr<I64Attr>:$stacked,
                       OptionalAttr<DenseI64ArrayAttr>:$rows,
                       OptionalAttr<DenseI64ArrayAttr>:$cols,
                       UnitAttr:$int8_activations,
                       UnitAttr:$panels);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = [{
    $name (`concat` $concat^)? (`append` $append^)? (`scale` $scale^ `block` $block)?
    (`group` $group^)? (`experts` $experts^ `of` $stacked)? (`rows` $rows^)? (`cols` $cols^)?
    (`int8_activations` $int8_activations^)? (`panels` $panels^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Plan_InputOp : Plan_Op<"input", [Pure]> {
  let summary = "an array the caller binds at each run (0: tokens, 1: positions)";
  let arguments = (ins I64Attr:$index);
  let results = (outs MemRefRankOf<[I32], [1]>:$result);
  let assemblyFormat = "$index attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Plan_AllocOp : Plan_Op<"alloc"> {
  let summary = "an activation buffer in the arena";
  let description = [{
    Dimension 0 may be dynamic: the token count of a run, at most the plan's
    `max_batch_tokens`. `moe-plan-memory` sets `offset` and `size` (bytes,
    at `max_batch_tokens` rows); buffers whose lifetimes do not overlap share
    bytes.

    ```mlir
    %1 = plan.alloc {offset = 0 : i64, size = 32768 : i64} : memref<?x32xf32>
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset, OptionalAttr<I64Attr>:$size);
  let results = (outs Res<AnyMemRef, "allocated", [MemAlloc]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Plan_RowsOp : Plan_Op<"rows", [Pure, AllTypesMatch<["base", "result"]>]> {
  let summary = "micro-batch `part` of `parts`: a view of a token-led buffer's rows";
  let description = [{
    Of a buffer whose dimension 0 is the step's tokens (a `plan.alloc` or
    a `plan.input`), the rows [T part / parts, T (part + 1) / parts),
    rounded down, where T is the step's token count: the parts of a step
    tile its rows, and a part may be empty (a step of fewer tokens than
    parts). It owns no memory: a launch or collective that takes the view
    reads or writes those rows of the base, so two parts of one buffer are
    disjoint and a part overlaps its base (the schedule verifier and the
    memory planner see it so). `moe-schedule-overlap` makes them; every
    token-led operand of a launch that takes one is a view of the same
    part.

    ```mlir
    %x0 = plan.rows %x part 0 of 2 : memref<?x32xf32>
    ```
  }];
  let arguments = (ins AnyMemRef:$base, I64Attr:$part, I64Attr:$parts);
  let results = (outs AnyMemRef:$result);
  let assemblyFormat = [{
    $base `part` $part `of` $parts attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Plan_KvCacheOp : Plan_Op<"kv_cache", [Pure]> {
  let summary = "declares KV-cache layer `layer`: k_width and v_width floats per token";
  let description = [{
    `gqa`: keys and values, kv_heads * head_dim each. `mla`: the normalised
    latent (k) and the rotated shared RoPE key (v).

    ```mlir
    %kv = plan.kv_cache 0 gqa k_width 16 v_width 16 : !plan.kv_cache
    ```
  }];
  let arguments = (ins I64Attr:$layer, Plan_KvKindAttr:$kind, I64Attr:$k_width,
                       I64Attr:$v_width);
  let results = (outs Plan_KvCacheType:$result);
  let assemblyFormat = [{
    $layer $kind `k_width` $k_width `v_width` $v_width attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Plan_LaunchOp : Plan_Op<"launch", [AttrSizedOperandSegments]> {
  let summary = "runs a kernel of Kernels.def reading `ins`, writing `outs`";
  let description = [{
    The kernel (a row of abi/include/moe/abi/Kernels.def) fixes how
    many inputs and outputs it takes, whether it takes a KV-cache layer, and
    which typed parameter attribute it needs (`params`). The op reads its
    inputs, writes its outputs and reads and writes its KV-cache layer (its
    memory effects), on execution stream `stream`.

    ```mlir
    plan.launch linear ins(%x, %w : memref<?x32xf32>, memref<16x32xbf16>)
                       outs(%y : memref<?x16xf32>)
    plan.launch rms_norm ins(%h, %w : memref<?x32xf32>, memref<32xbf16>)
                         outs(%x : memref<?x32xf32>)
                         params #plan.rms_norm<eps = 9.99999997E-7 : f32>
    ```
  }];
  let arguments = (ins Plan_KernelAttr:$kernel,
                       Arg<Variadic<AnyMemRef>, "read", [MemRead]>:$ins,
                       Arg<Variadic<AnyMemRef>, "written", [MemWrite]>:$outs,
                       Arg<Optional<Plan_KvCacheType>, "read and written",
                           [MemRead, MemWrite]>:$kv,
                       OptionalAttr<AnyAttr>:$params,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let assemblyFormat = [{
    custom<KernelName>($kernel) `ins` `(` $ins `:` type($ins) `)`
    `outs` `(` $outs `:` type($outs) `)` (`kv` $kv^)? (`params` $params^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The kernel's row of Kernels.def.
    const ::mlir::plan::KernelInfo &info() { return kernelInfo(getKernel().getKernel()); }
    /// A sharded expert launch's held experts and replicas are consistent.
    ::mlir::LogicalResult checkShare(::mlir::plan::ExpertsParamsAttr params);
  }];
}

def Plan_CollectiveOp : Plan_Op<"collective", [AttrSizedOperandSegments]> {
  let summary = "a collective among the ranks, on execution stream `stream`";
  let description = [{
    Every rank's program runs the same collectives in the same order (the
    loader checks it). `all_reduce`: out = the sum over ranks of in (out may
    alias nothing but must have in's shape). `all_gather`: out = [ranks] +
    in's shape, rank r's input at out[r]. `all_to_all_v` moves expert rows
    between ranks holding different tokens (data-parallel attention):
    `ins(rows [T, P, H], slots [T, P]) outs(received [T, ranks x P, H],
    received slots [T, ranks x P])` sends each row to the rank whose
    `expert_rows` (the one that reads `received`) holds its slot's expert;
    what arrives is packed from the front in rank order, the slots of the
    rows left over are -1 (no row). `ins(y [T, ranks x P, H]) outs(rows
    [T, P, H])` returns the rows of the last exchange to the ranks that
    sent them, each to the place it came from. Both are sized for the
    worst case (every rank's T x P rows arriving at one); the counts are
    exchanged at run time. Data is f32 or bf16, slots i32. Collectives also use the ranks' communicator: two
    of them on different streams need an event between them (else the
    ranks could run them in different orders), which moe-verify-schedule
    checks as for a buffer. With `group`, the collective spans that group's
    ranks (this rank's program among them; `ranks` in the shapes above is
    the group's size); without, every rank.

    ```mlir
    plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%y : memref<?x32xf32>)
    plan.collective all_reduce ins(%x : memref<?x32xf32>) outs(%x : memref<?x32xf32>)
        {group = #plan.group<tensor, [0, 1]>}
    plan.collective all_gather ins(%x : memref<?x32xf32>) outs(%g : memref<2x?x32xf32>)
    plan.collective all_to_all_v ins(%rows, %slots : memref<?x3x32xf32>, memref<?x3xi32>)
                                 outs(%in, %inSlots : memref<?x6x32xf32>, memref<?x6xi32>)
    plan.collective all_to_all_v ins(%y : memref<?x6x32xf32>) outs(%back : memref<?x3x32xf32>)
    ```
  }];
  let arguments = (ins Plan_CollectiveKindAttr:$kind,
                       Arg<Variadic<AnyMemRef>, "read", [MemRead]>:$ins,
                       Arg<Variadic<AnyMemRef>, "written", [MemWrite]>:$outs,
                       DefaultValuedAttr<I64Attr, "0">:$stream,
                       OptionalAttr<Plan_GroupAttr>:$group);
  let assemblyFormat = [{
    $kind `ins` `(` $ins `:` type($ins) `)` `outs` `(` $outs `:` type($outs) `)` attr-dict
  }];
  let hasVerifier = 1;
}

def Plan_RecordOp : Plan_Op<"record"> {
  let summary = "an event: the completion of stream `stream`'s work so far";
  let description = [{
    Together with `plan.wait`, the only order between streams: work on one
    stream is ordered after work on another only through a record on the
    first and a wait for it on the second (program order orders each stream
    within itself). `moe-verify-schedule` refuses a schedule in which two
    streams touch a buffer without such an order.

    ```mlir
    %e = plan.record stream 1 : !plan.event
    plan.wait %e stream 0
    ```
  }];
  let arguments = (ins I64Attr:$stream);
  let results = (outs Plan_EventType:$event);
  let assemblyFormat = "`stream` $stream attr-dict `:` type($event)";
  let hasVerifier = 1;
}

def Plan_WaitOp : Plan_Op<"wait"> {
  let summary = "stream `stream`'s later work waits for `event`";
  let arguments = (ins Plan_EventType:$event, I64Attr:$stream);
  let assemblyFormat = "$event `stream` $stream attr-dict";
  let hasVerifier = 1;
}

def Plan_OutputOp : Plan_Op<"output"> {
  let summary = "the program's result (the logits)";
  let arguments = (ins Arg<AnyMemRef, "read", [MemRead]>:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif
