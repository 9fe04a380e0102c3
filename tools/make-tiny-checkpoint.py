#!/usr/bin/env python3
"""Writes a tiny random-weight Hugging Face MoE checkpoint (config.json +
safetensors) for importer tests, using only the Python standard library.

The tensor names and shapes here are written from the transformers modeling
files independently of the C++ importer, so each checks the other. Options
can break the checkpoint on purpose (--corrupt, --unset, --set) to exercise
the bad-input paths.

  make-tiny-checkpoint.py --model-type mixtral --out DIR [--dtype BF16]
      [--fp8] [--stacked] [--shards N] [--config-only] [--seed N]
      [--dims KEY=JSON]... [--set KEY=JSON]... [--unset KEY]...
      [--corrupt KIND[=ARG]]...
"""
import argparse
import json
import os
import random
import struct
import sys

CONFIGS = {
    "mixtral": dict(
        vocab_size=96, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128,
        rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None,
        tie_word_embeddings=False),
    "qwen2_moe": dict(
        vocab_size=96, hidden_size=32, intermediate_size=40,
        moe_intermediate_size=24, shared_expert_intermediate_size=56,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        num_experts=6, num_experts_per_tok=2, norm_topk_prob=False,
        decoder_sparse_step=1, mlp_only_layers=[1], max_position_embeddings=128,
        rms_norm_eps=1e-6, rope_theta=10000.0, use_sliding_window=False,
        sliding_window=64, tie_word_embeddings=False),
    "qwen3_moe": dict(
        vocab_size=96, hidden_size=32, intermediate_size=40,
        moe_intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=12, num_experts=8,
        num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=2,
        mlp_only_layers=[], max_position_embeddings=128, rms_norm_eps=1e-6,
        rope_theta=1e6, attention_bias=False, tie_word_embeddings=True),
    "deepseek_v2": dict(
        vocab_size=96, hidden_size=32, intermediate_size=40,
        moe_intermediate_size=16, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=16,
        qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
        topk_method="group_limited_greedy", n_group=4, topk_group=2,
        routed_scaling_factor=1.0, scoring_func="softmax", norm_topk_prob=False,
        first_k_dense_replace=1, moe_layer_freq=1, max_position_embeddings=128,
        rms_norm_eps=1e-6, rope_theta=10000.0,
        rope_scaling=dict(type="yarn", factor=4.0, mscale=0.707,
                          mscale_all_dim=0.707,
                          original_max_position_embeddings=32,
                          beta_fast=32, beta_slow=1),
        attention_bias=False, tie_word_embeddings=False),
    "deepseek_v3": dict(
        vocab_size=96, hidden_size=32, intermediate_size=40,
        moe_intermediate_size=16, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, q_lora_rank=24, kv_lora_rank=16,
        qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
        topk_method="noaux_tc", n_group=4, topk_group=2,
        routed_scaling_factor=2.5, scoring_func="sigmoid", norm_topk_prob=True,
        first_k_dense_replace=1, moe_layer_freq=1, max_position_embeddings=128,
        rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None,
        attention_bias=False, tie_word_embeddings=False),
}

DTYPE_SIZE = {"F32": 4, "BF16": 2, "F16": 2, "F8_E4M3": 1, "I32": 4}


def tensors(c, stacked):
    """(name, shape, linear) of every tensor, in checkpoint order."""
    t = c["model_type"]
    H, V = c["hidden_size"], c["vocab_size"]
    out = [("model.embed_tokens.weight", [V, H], False)]
    deepseek = t.startswith("deepseek")
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out.append((f"{p}.input_layernorm.weight", [H], False))
        out.append((f"{p}.post_attention_layernorm.weight", [H], False))
        a = f"{p}.self_attn"
        if deepseek:
            nh = c["num_attention_heads"]
            qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
            r = c["kv_lora_rank"]
            if c.get("q_lora_rank"):
                q = c["q_lora_rank"]
                out += [(f"{a}.q_a_proj.weight", [q, H], True),
                        (f"{a}.q_a_layernorm.weight", [q], False),
                        (f"{a}.q_b_proj.weight", [nh * qk, q], True)]
            else:
                out.append((f"{a}.q_proj.weight", [nh * qk, H], True))
            out += [(f"{a}.kv_a_proj_with_mqa.weight",
                     [r + c["qk_rope_head_dim"], H], True),
                    (f"{a}.kv_a_layernorm.weight", [r], False),
                    (f"{a}.kv_b_proj.weight",
                     [nh * (c["qk_nope_head_dim"] + c["v_head_dim"]), r], True),
                    (f"{a}.o_proj.weight", [H, nh * c["v_head_dim"]], True)]
        else:
            hd = c.get("head_dim") or H // c["num_attention_heads"]
            q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
            for n, rows in (("q", q), ("k", kv), ("v", kv)):
                out.append((f"{a}.{n}_proj.weight", [rows, H], True))
                if t == "qwen2_moe":
                    out.append((f"{a}.{n}_proj.bias", [rows], False))
            out.append((f"{a}.o_proj.weight", [H, q], True))
            if t == "qwen3_moe":
                out += [(f"{a}.q_norm.weight", [hd], False),
                        (f"{a}.k_norm.weight", [hd], False)]
        if t == "mixtral":
            sparse = True
        elif deepseek:
            sparse = (i >= c["first_k_dense_replace"]
                      and i % c["moe_layer_freq"] == 0)
        else:
            sparse = ((i + 1) % c["decoder_sparse_step"] == 0
                      and i not in c["mlp_only_layers"])
        # transformers v5 renames Mixtral's block to `mlp` when it saves stacked.
        m = f"{p}.block_sparse_moe" if t == "mixtral" and not stacked else f"{p}.mlp"
        if not sparse:
            I = c["intermediate_size"]
            out += [(f"{m}.gate_proj.weight", [I, H], True),
                    (f"{m}.up_proj.weight", [I, H], True),
                    (f"{m}.down_proj.weight", [H, I], True)]
            continue
        E = c.get("num_local_experts") or c.get("num_experts") or c["n_routed_experts"]
        I = c["intermediate_size"] if t == "mixtral" else c["moe_intermediate_size"]
        out.append((f"{m}.gate.weight", [E, H], False))
        if t == "deepseek_v3":
            out.append((f"{m}.gate.e_score_correction_bias", [E], False))
        names = ("w1", "w3", "w2") if t == "mixtral" else (
            "gate_proj", "up_proj", "down_proj")
        if stacked:
            out += [(f"{m}.experts.gate_up_proj", [E, 2 * I, H], True),
                    (f"{m}.experts.down_proj", [E, H, I], True)]
        else:
            for e in range(E):
                out += [(f"{m}.experts.{e}.{names[0]}.weight", [I, H], True),
                        (f"{m}.experts.{e}.{names[1]}.weight", [I, H], True),
                        (f"{m}.experts.{e}.{names[2]}.weight", [H, I], True)]
        shared = None
        if t == "qwen2_moe":
            shared = (f"{m}.shared_expert", c["shared_expert_intermediate_size"])
            out.append((f"{m}.shared_expert_gate.weight", [1, H], False))
        elif deepseek and c.get("n_shared_experts"):
            shared = (f"{m}.shared_experts",
                      c["n_shared_experts"] * c["moe_intermediate_size"])
        if shared:
            s, S = shared
            out += [(f"{s}.gate_proj.weight", [S, H], True),
                    (f"{s}.up_proj.weight", [S, H], True),
                    (f"{s}.down_proj.weight", [H, S], True)]
    out.append(("model.norm.weight", [H], False))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", [V, H], False))
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# Tensors larger than this repeat one random block, so that benchmark-sized
# checkpoints (GBs) are written in seconds.
TILE = 1 << 16


def payload(rng, dtype, n):
    if n > TILE:
        block = payload(rng, dtype, TILE)
        return (block * (n // TILE + 1))[:n * DTYPE_SIZE[dtype]]
    if dtype == "F8_E4M3":  # avoid 0x7f/0xff (NaN)
        return bytes(rng.randrange(0x7f) | (rng.randrange(2) << 7) for _ in range(n))
    vals = [rng.uniform(-0.1, 0.1) for _ in range(n)]
    if dtype == "F32" or dtype == "I32":
        return struct.pack(f"<{n}f", *vals)
    if dtype == "F16":
        return struct.pack(f"<{n}e", *vals)
    raw = struct.pack(f"<{n}f", *vals)  # BF16: the high half of each f32
    return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))


def write_safetensors(path, entries, corrupt):
    """entries: list of (name, dtype, shape, data)."""
    header, blobs, offset = {}, [], 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    names = [e[0] for e in entries]
    if "overlap" in corrupt and len(names) > 1:
        first = header[names[0]]["data_offsets"]
        second = header[names[1]]
        size = second["data_offsets"][1] - second["data_offsets"][0]
        second["data_offsets"] = [first[0] + 1, first[0] + 1 + size]
    if "out-of-file" in corrupt:
        last = header[names[-1]]["data_offsets"]
        header[names[-1]]["data_offsets"] = [last[0] + 64, last[1] + 64]
    if "unknown-dtype" in corrupt:
        header[names[0]]["dtype"] = "F13"
    if "size-mismatch" in corrupt:
        header[names[0]]["shape"] = [header[names[0]]["shape"][0] + 1] + header[names[0]]["shape"][1:]
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    if "header-not-json" in corrupt:
        text = b"{not json" + b" " * (len(text) - 9)
    blob = struct.pack("<Q", len(text)) + text + b"".join(blobs)
    if "truncate-header" in corrupt:
        blob = blob[:8 + len(text) // 2]
    if "truncate-data" in corrupt:
        blob = blob[:-100]
    if "tiny-file" in corrupt:
        blob = blob[:5]
    with open(path, "wb") as f:
        f.write(blob)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-type", required=True, choices=sorted(CONFIGS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="BF16", choices=["F32", "BF16", "F16"])
    ap.add_argument("--fp8", action="store_true",
                    help="linear weights F8_E4M3 with 16x16 block scales")
    ap.add_argument("--stacked", action="store_true",
                    help="experts as stacked gate_up_proj/down_proj tensors")
    ap.add_argument("--v5-config", action="store_true",
                    help="write config.json as transformers v5 does: "
                         "rope_parameters, dtype, num_local_experts")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config-only", action="store_true")
    ap.add_argument("--dims", action="append", default=[], metavar="KEY=JSON",
                    help="change a config value before the tensors are made "
                         "(sizes that the weights follow)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="change a config value after the tensors are made "
                         "(to make config and weights disagree)")
    ap.add_argument("--unset", action="append", default=[], metavar="KEY")
    ap.add_argument("--corrupt", action="append", default=[],
                    help="truncate-header, truncate-data, tiny-file, header-not-json, overlap, "
                         "out-of-file, unknown-dtype, size-mismatch, "
                         "missing-shard, drop=NAME, wrong-shape=NAME, "
                         "dtype=NAME:DTYPE")
    a = ap.parse_args()

    c = dict(model_type=a.model_type,
             torch_dtype={"F32": "float32", "BF16": "bfloat16",
                          "F16": "float16"}[a.dtype],
             **CONFIGS[a.model_type])
    if a.fp8:
        c["quantization_config"] = dict(quant_method="fp8", fmt="e4m3",
                                        activation_scheme="dynamic",
                                        weight_block_size=[16, 16])
    for kv in a.dims:
        key, value = kv.split("=", 1)
        c[key] = json.loads(value)
    spec = tensors(c, a.stacked)
    if a.v5_config:
        rope = dict(rope_type="default", rope_theta=c.pop("rope_theta"))
        rope.update(c.pop("rope_scaling", None) or {})
        c["rope_parameters"] = rope
        c["dtype"] = c.pop("torch_dtype")
        if "num_experts" in c:
            c["num_local_experts"] = c.pop("num_experts")
    for kv in a.set:
        key, value = kv.split("=", 1)
        c[key] = json.loads(value)
    for key in a.unset:
        c.pop(key, None)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    if a.config_only:
        return

    corrupt = {k.split("=", 1)[0]: (k.split("=", 1) + [""])[1] for k in a.corrupt}
    rng = random.Random(a.seed)
    entries = []
    for name, shape, linear in spec:
        if name == corrupt.get("drop"):
            continue
        dtype = "F8_E4M3" if (a.fp8 and linear) else a.dtype
        if name.endswith("e_score_correction_bias"):
            dtype = "F32"
        if corrupt.get("dtype", ":").split(":")[0] == name:
            dtype = corrupt["dtype"].split(":")[1]
        data = payload(rng, dtype, numel(shape))
        if name == corrupt.get("wrong-shape"):
            shape = list(reversed(shape)) if len(shape) > 1 else [shape[0] * 2]
            data = payload(rng, dtype, numel(shape))
        entries.append((name, dtype, shape, data))
        if dtype == "F8_E4M3":
            s = [(d + 15) // 16 for d in shape[-2:]]
            s = shape[:-2] + s
            scales = struct.pack(f"<{numel(s)}f",
                                 *[rng.uniform(1e-3, 1e-2) for _ in range(numel(s))])
            if name + "_scale_inv" != corrupt.get("drop"):
                entries.append((name + "_scale_inv", "F32", s, scales))

    if a.shards == 1:
        write_safetensors(os.path.join(a.out, "model.safetensors"), entries, corrupt)
        return
    per = (len(entries) + a.shards - 1) // a.shards
    weight_map = {}
    for k in range(a.shards):
        file = f"model-{k + 1:05d}-of-{a.shards:05d}.safetensors"
        part = entries[k * per:(k + 1) * per]
        for e in part:
            weight_map[e[0]] = file
        if "missing-shard" in corrupt and k == a.shards - 1:
            continue
        write_safetensors(os.path.join(a.out, file), part,
                          corrupt if k == 0 else {})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
