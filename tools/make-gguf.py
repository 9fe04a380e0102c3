#!/usr/bin/env python3
"""Write a llama.cpp GGUF with a real model's tensor shapes and random weights.

  make-gguf.py CONFIG_JSON OUT_GGUF --type q4_0|q8_0 [--layers N] [--seed S]
               [--gguf-py DIR]

Why: to benchmark against llama.cpp (llama-bench, llama-batched-bench) at the
sizes of real checkpoints (Qwen3-30B-A3B, DeepSeek-V2-Lite) without
downloading them. Speed depends on shapes and quant types, not on the values,
so the weights are random; they are scaled so that activations stay finite.

What it writes, from a Hugging Face config.json:
  * model_type qwen3_moe  -> llama.cpp arch "qwen3moe"
    model_type deepseek_v2 -> llama.cpp arch "deepseek2" (split attn_k_b /
    attn_v_b, as the vendored convert_hf_to_gguf.py writes them, so that
    llama.cpp runs its MLA path). Any other model_type is refused.
  * The hyperparameter keys that the vendored convert_hf_to_gguf.py writes for
    these architectures, plus `<arch>.vocab_size`.
  * Every matrix (embedding and output head included) in --type: Q4_0 blocks
    (fp16 d, 16 bytes of nibbles per 32 weights) or Q8_0 blocks (fp16 d, 32
    int8). Quants are uniform random bytes; each block's d has a random sign
    (so weights have zero mean) and a magnitude in [0.5, 1.5) x d0, with d0 chosen
    so that a weight has RMS 1/sqrt(K) (K = the matrix's input size): a
    matmul keeps the RMS of its input. Embedding rows have RMS 1.
  * As the converter stores them: norms F32 (ones), the router ffn_gate_inp
    F32 (normal, RMS 1/sqrt(K)), exp_probs_b F32 (zeros, only for
    topk_method noaux_tc).
  * Tokenizer metadata: tokenizer.ggml.model "none" plus `<arch>.vocab_size`.
    llama.cpp then makes vocab_size dummy tokens (no BOS), which is all that
    llama-bench / llama-batched-bench need (random or constant token ids);
    prompts can not be tokenized with it.

--layers N keeps the first N layers. The llama.cpp this was written against
(4227c9b, vendored by llama-cpp-python 0.3.16) recognises DeepSeek-V2-Lite's
attention (one q projection, no q_lora) only when n_layer == 27. Truncating
such a config to N != 27 layers therefore writes a low-rank q projection
(attn_q_a, attn_q_a_norm, attn_q_b) with about as many weights as attn_q,
and says so on stderr; --layers 27 (the default) keeps the exact shapes.

Tensor data is streamed to disk in chunks (peak RSS about 0.2 GB whatever
the model size) into OUT_GGUF.partial, renamed to OUT_GGUF when complete;
progress goes to stderr. GGUFWriter from llama.cpp's gguf-py (imported, by
default from the llama.cpp that `make bench-vs-llamacpp` fetches) writes the
header, the metadata and the tensor infos.
"""

import argparse
import json
import math
import re
import sys
import time
from functools import partial
from pathlib import Path

from llamacpp import import_gguf_py

CHUNK_BLOCKS = 1 << 20          # quant blocks generated and written at a time
CHUNK_FLOATS = 1 << 22          # F32 values generated and written at a time
PROG = "make-gguf"

gguf = None                     # the gguf-py module, imported by load_gguf_py()
np = None                       # numpy, imported by load_gguf_py()


def die(msg, code=1):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(code)


def note(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Setup


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="make-gguf.py",
        description="Write a GGUF with a real model's shapes and random weights.")
    p.add_argument("config", help="Hugging Face config.json (qwen3_moe or deepseek_v2)")
    p.add_argument("out", help="GGUF file to write")
    p.add_argument("--type", required=True, choices=["q4_0", "q8_0"],
                   help="quant type of every matrix")
    p.add_argument("--layers", type=int, default=None,
                   help="keep the first N layers (default: all)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--gguf-py", default=None,
                   help="llama.cpp's gguf-py directory (default: the vendored one "
                   "tools/llamacpp.py fetches)")
    return p.parse_args(argv)


def load_gguf_py(path):
    global gguf, np
    try:
        import numpy
    except ImportError:
        die(f"numpy is missing from this Python ({sys.executable})")
    np = numpy
    gguf = import_gguf_py(path)


def load_config(path, layers):
    try:
        cfg = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        die(f"cannot read {path}: {e}")
    kind = cfg.get("model_type")
    if kind not in ("qwen3_moe", "deepseek_v2"):
        die(f"model_type {kind!r} is not supported (only qwen3_moe, deepseek_v2)", 2)
    total = cfg.get("num_hidden_layers")
    if not isinstance(total, int):
        die(f"{path} has no num_hidden_layers", 2)
    if layers is not None:
        if not 1 <= layers <= total:
            die(f"--layers must be in 1..{total} (the config's num_hidden_layers)", 2)
        cfg["num_hidden_layers"] = layers
    return cfg


def rope_theta(cfg):
    params = cfg.get("rope_parameters") or {}
    return cfg.get("rope_theta", params.get("rope_theta"))


def rope_scaling(cfg):
    """The rope scaling dict, from transformers 4 (rope_scaling) or 5
    (rope_parameters) configs; {} when there is none."""
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    return scaling if kind not in (None, "default") else {}


# ---------------------------------------------------------------------------
# Tensor plans: (name, ggml shape [ne0, ne1, ...], fill, K)
#   fill: "quant" (the chosen type), "ones", "zeros" or "router" (F32)
#   K: a matrix's input size (ne0) for the scale; 1 for embedding rows


def tensor_name(key, bid=None, suffix="weight"):
    base = gguf.TENSOR_NAMES[getattr(gguf.MODEL_TENSOR, key)]
    return (base.format(bid=bid) if bid is not None else base) + "." + suffix


def matrix(key, ne0, ne1, bid=None, ne2=None):
    shape = [ne0, ne1] if ne2 is None else [ne0, ne1, ne2]
    return (tensor_name(key, bid), shape, "quant", ne0)


def norm(key, n, bid=None):
    return (tensor_name(key, bid), [n], "ones", 1)


def common_head(cfg):
    embd, vocab = cfg["hidden_size"], cfg["vocab_size"]
    return [(tensor_name("TOKEN_EMBD"), [embd, vocab], "quant", 1)]


def common_tail(cfg, with_output=True):
    embd, vocab = cfg["hidden_size"], cfg["vocab_size"]
    tail = [norm("OUTPUT_NORM", embd)]
    if with_output:
        tail.append(matrix("OUTPUT", embd, vocab))
    return tail


def n_experts(cfg):
    return cfg.get("num_experts", cfg.get("num_local_experts"))


def qwen3moe_tensors(cfg):
    embd = cfg["hidden_size"]
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or embd // heads
    ff, experts = cfg["moe_intermediate_size"], n_experts(cfg)
    out = common_head(cfg)
    for i in range(cfg["num_hidden_layers"]):
        out += [
            norm("ATTN_NORM", embd, i),
            matrix("ATTN_Q", embd, heads * head_dim, i),
            matrix("ATTN_K", embd, kv_heads * head_dim, i),
            matrix("ATTN_V", embd, kv_heads * head_dim, i),
            matrix("ATTN_OUT", heads * head_dim, embd, i),
            norm("ATTN_Q_NORM", head_dim, i),
            norm("ATTN_K_NORM", head_dim, i),
            norm("FFN_NORM", embd, i),
            (tensor_name("FFN_GATE_INP", i), [embd, experts], "router", embd),
            matrix("FFN_GATE_EXP", embd, ff, i, experts),
            matrix("FFN_DOWN_EXP", ff, embd, i, experts),
            matrix("FFN_UP_EXP", embd, ff, i, experts),
        ]
    return out + common_tail(cfg, with_output=not cfg.get("tie_word_embeddings", False))


def deepseek2_q_lora_rank(cfg, block):
    """q_lora_rank to write: the config's, or (when llama.cpp would not take a
    no-q_lora model for V2-Lite) a stand-in with about attn_q's weight count."""
    rank = cfg.get("q_lora_rank")
    n_layer = cfg["num_hidden_layers"]
    if rank is not None and n_layer == 27:
        die("llama.cpp (4227c9b) reads every 27-layer deepseek2 as V2-Lite (no "
            "q_lora); this config has q_lora_rank set: pick another --layers", 2)
    if rank is not None or n_layer == 27:
        return rank
    embd = cfg["hidden_size"]
    n_q = cfg["num_attention_heads"] * (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
    rank = max(block, round(embd * n_q / (embd + n_q) / block) * block)
    note(f"note: llama.cpp 4227c9b takes a deepseek2 without q_lora for V2-Lite "
         f"only at 27 layers; with --layers {n_layer}, attn_q [{embd}, {n_q}] is "
         f"written as attn_q_a [{embd}, {rank}] + attn_q_a_norm + attn_q_b "
         f"[{rank}, {n_q}] (q_lora_rank {rank})")
    return rank


def deepseek2_tensors(cfg, q_lora_rank):
    embd, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    nope, rope, v_dim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    kv_rank, experts = cfg["kv_lora_rank"], cfg["n_routed_experts"]
    ff_exp, shared = cfg["moe_intermediate_size"], cfg.get("n_shared_experts") or 0
    n_dense = min(cfg.get("first_k_dense_replace", 0), cfg["num_hidden_layers"])
    out = common_head(cfg)
    for i in range(cfg["num_hidden_layers"]):
        out.append(norm("ATTN_NORM", embd, i))
        if q_lora_rank is None:
            out.append(matrix("ATTN_Q", embd, heads * (nope + rope), i))
        else:
            out += [matrix("ATTN_Q_A", embd, q_lora_rank, i),
                    norm("ATTN_Q_A_NORM", q_lora_rank, i),
                    matrix("ATTN_Q_B", q_lora_rank, heads * (nope + rope), i)]
        out += [
            matrix("ATTN_KV_A_MQA", embd, kv_rank + rope, i),
            norm("ATTN_KV_A_NORM", kv_rank, i),
            matrix("ATTN_K_B", nope, kv_rank, i, heads),
            matrix("ATTN_V_B", kv_rank, v_dim, i, heads),
            matrix("ATTN_OUT", heads * v_dim, embd, i),
            norm("FFN_NORM", embd, i),
        ]
        if i < n_dense:
            ff = cfg["intermediate_size"]
            out += [matrix("FFN_GATE", embd, ff, i),
                    matrix("FFN_DOWN", ff, embd, i),
                    matrix("FFN_UP", embd, ff, i)]
            continue
        out.append((tensor_name("FFN_GATE_INP", i), [embd, experts], "router", embd))
        if cfg.get("topk_method") == "noaux_tc":
            out.append((tensor_name("FFN_EXP_PROBS_B", i, "bias"), [experts], "zeros", 1))
        out += [matrix("FFN_GATE_EXP", embd, ff_exp, i, experts),
                matrix("FFN_DOWN_EXP", ff_exp, embd, i, experts),
                matrix("FFN_UP_EXP", embd, ff_exp, i, experts)]
        if shared:
            out += [matrix("FFN_GATE_SHEXP", embd, ff_exp * shared, i),
                    matrix("FFN_DOWN_SHEXP", ff_exp * shared, embd, i),
                    matrix("FFN_UP_SHEXP", embd, ff_exp * shared, i)]
    return out + common_tail(cfg)


# ---------------------------------------------------------------------------
# Metadata: the keys convert_hf_to_gguf.py writes (TextModel, Qwen2MoeModel,
# DeepseekV2Model .set_gguf_parameters), a "none" vocabulary and general.*


def write_common_kv(w, cfg, ftype, n_head_kv):
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(f"random {cfg['model_type']} ({cfg['num_hidden_layers']} layers)")
    w.add_block_count(cfg["num_hidden_layers"])
    if "max_position_embeddings" in cfg:
        w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    if "intermediate_size" in cfg:
        w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(n_head_kv)
    if rope_theta(cfg) is not None:
        w.add_rope_freq_base(rope_theta(cfg))
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-6))
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_file_type(ftype)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_tokenizer_model("none")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


def write_yarn_kv(w, scaling):
    if scaling.get("rope_type", scaling.get("type")) == "yarn" and "factor" in scaling:
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(scaling["factor"])
        w.add_rope_scaling_orig_ctx_len(scaling["original_max_position_embeddings"])
        return True
    return False


def qwen3moe_kv(w, cfg, ftype):
    write_common_kv(w, cfg, ftype, cfg["num_key_value_heads"])
    if cfg.get("head_dim") is not None:
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_expert_count(n_experts(cfg))
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if cfg.get("shared_expert_intermediate_size") is not None:
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    write_yarn_kv(w, rope_scaling(cfg))


def deepseek2_kv(w, cfg, ftype, q_lora_rank):
    write_common_kv(w, cfg, ftype, 1)   # MLA is written as MQA: one kv head
    nope, rope = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
    w.add_leading_dense_block_count(min(cfg.get("first_k_dense_replace", 0),
                                        cfg["num_hidden_layers"]))
    if q_lora_rank is not None:
        w.add_q_lora_rank(q_lora_rank)
    w.add_kv_lora_rank(cfg["kv_lora_rank"])
    w.add_key_length(cfg["kv_lora_rank"] + rope)
    w.add_value_length(cfg["kv_lora_rank"])
    w.add_key_length_mla(nope + rope)
    w.add_value_length_mla(cfg["v_head_dim"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_expert_count(cfg["n_routed_experts"])
    w.add_expert_shared_count(cfg.get("n_shared_experts") or 0)
    w.add_expert_weights_scale(cfg.get("routed_scaling_factor", 1.0))
    w.add_expert_weights_norm(bool(cfg.get("norm_topk_prob", False)))
    scoring = cfg.get("scoring_func", "softmax")
    if scoring not in ("softmax", "sigmoid"):
        die(f"scoring_func {scoring!r} is not supported (softmax, sigmoid)", 2)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType[scoring.upper()])
    w.add_rope_dimension_count(rope)
    scaling = rope_scaling(cfg)
    if write_yarn_kv(w, scaling):
        w.add_rope_scaling_yarn_log_mul(0.1 * scaling["mscale_all_dim"])


def check_supported(cfg):
    if cfg["model_type"] == "qwen3_moe":
        if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1:
            die("qwen3_moe with dense layers (mlp_only_layers, decoder_sparse_step "
                "!= 1) is not supported: llama.cpp's qwen3moe has none", 2)
        if n_experts(cfg) is None:
            die("config has neither num_experts nor num_local_experts", 2)


# ---------------------------------------------------------------------------
# Data


def quant_layout(qtype):
    """(bytes of quants per 32-weight block, RMS of a dequantized quant / d)."""
    if qtype == gguf.GGMLQuantizationType.Q4_0:
        values = np.arange(16) - 8          # nibble q -> (q - 8) * d
        return 16, math.sqrt(np.mean(values ** 2.0))
    values = np.arange(-128, 128)           # int8 q -> q * d
    return 32, math.sqrt(np.mean(values ** 2.0))


def quant_chunks(rng, qtype, n_blocks, k):
    """Random blocks of qtype, CHUNK_BLOCKS at a time: uniform random quants,
    d = +-[0.5, 1.5) * d0 with d0 such that a weight has RMS 1/sqrt(k)."""
    qbytes, q_rms = quant_layout(qtype)
    scale_rms = math.sqrt(13.0 / 12.0)      # RMS of |d| / d0, |d| / d0 ~ U[0.5, 1.5)
    d0 = 1.0 / (math.sqrt(k) * q_rms * scale_rms)
    done = 0
    while done < n_blocks:
        n = min(CHUNK_BLOCKS, n_blocks - done)
        blocks = np.empty((n, 2 + qbytes), dtype=np.uint8)
        blocks[:, 2:] = np.frombuffer(rng.bytes(n * qbytes), dtype=np.uint8).reshape(n, qbytes)
        u = rng.uniform(-1.0, 1.0, n)
        d = (d0 * (u + 0.5 * np.sign(u))).astype("<f2")
        blocks[:, :2] = d.view(np.uint8).reshape(n, 2)
        yield blocks
        done += n


def f32_chunks(rng, fill, count, k):
    done = 0
    while done < count:
        n = min(CHUNK_FLOATS, count - done)
        if fill == "ones":
            yield np.ones(n, dtype="<f4")
        elif fill == "zeros":
            yield np.zeros(n, dtype="<f4")
        else:
            yield (rng.standard_normal(n, dtype=np.float32) / math.sqrt(k)).astype("<f4")
        done += n


def tensor_bytes(shape, fill, qtype):
    count = math.prod(shape)
    if fill != "quant":
        return count * 4
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    return count // block * type_size


def declare_tensors(w, plan, qtype):
    """add_tensor_info for each tensor (gguf-py takes numpy order: reversed)."""
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    for name, shape, fill, _ in plan:
        nbytes = tensor_bytes(shape, fill, qtype)
        if fill == "quant":
            if shape[0] % block:
                die(f"{name}: row size {shape[0]} is not a multiple of {block}", 2)
            byte_shape = list(reversed(shape[1:])) + [nbytes // math.prod(shape[1:])]
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qtype)
        else:
            w.add_tensor_info(name, list(reversed(shape)), np.dtype(np.float32), nbytes)


def check_names(plan, arch):
    """Every tensor must be one that gguf-py lists for the architecture."""
    known = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[arch]}
    for name, *_ in plan:
        base = re.sub(r"^blk\.\d+\.", "blk.{bid}.", name.rsplit(".", 1)[0])
        if base not in known:
            die(f"internal: {name} is not a {gguf.MODEL_ARCH_NAMES[arch]} tensor in gguf-py")


def pad(f, alignment):
    f.write(b"\0" * (-f.tell() % alignment))


def write_data(path, plan, qtype, seed, alignment):
    """Append every tensor's data, each aligned, in the declared order."""
    rng = np.random.default_rng(seed)
    total = sum(tensor_bytes(s, fl, qtype) for _, s, fl, _ in plan)
    written, start, last_note = 0, time.monotonic(), 0.0
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    with open(path, "ab") as f:
        for name, shape, fill, k in plan:
            pad(f, alignment)
            if fill == "quant":
                chunks = quant_chunks(rng, qtype, math.prod(shape) // block, k)
            else:
                chunks = f32_chunks(rng, fill, math.prod(shape), k)
            for chunk in chunks:
                f.write(chunk.data)
                written += chunk.nbytes
            now = time.monotonic()
            if now - last_note > 5 or written == total:
                last_note = now
                note(f"{written / 2**20:9.0f} / {total / 2**20:.0f} MiB  "
                     f"{now - start:6.1f} s  ({name})")
        pad(f, alignment)


# ---------------------------------------------------------------------------


def main(argv):
    try:
        return make_gguf(parse_args(argv))
    except KeyError as e:
        die(f"the config has no {e} (needed for its model_type)", 2)


def make_gguf(args):
    cfg = load_config(args.config, args.layers)
    load_gguf_py(args.gguf_py)
    check_supported(cfg)
    qtype = gguf.GGMLQuantizationType[args.type.upper()]
    ftype = gguf.LlamaFileType[f"MOSTLY_{args.type.upper()}"]

    if cfg["model_type"] == "qwen3_moe":
        arch, plan = gguf.MODEL_ARCH.QWEN3MOE, qwen3moe_tensors(cfg)
        write_kv = partial(qwen3moe_kv, cfg=cfg, ftype=ftype)
    else:
        q_lora = deepseek2_q_lora_rank(cfg, gguf.GGML_QUANT_SIZES[qtype][0])
        arch, plan = gguf.MODEL_ARCH.DEEPSEEK2, deepseek2_tensors(cfg, q_lora)
        write_kv = partial(deepseek2_kv, cfg=cfg, ftype=ftype, q_lora_rank=q_lora)

    check_names(plan, arch)

    out = Path(args.out)
    partial_out = out.with_name(out.name + ".partial")   # renamed when complete
    w = gguf.GGUFWriter(partial_out, gguf.MODEL_ARCH_NAMES[arch])
    write_kv(w)
    declare_tensors(w, plan, qtype)
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        w.close()
        total = sum(tensor_bytes(s, fl, qtype) for _, s, fl, _ in plan)
        note(f"{out}: {gguf.MODEL_ARCH_NAMES[arch]}, {cfg['num_hidden_layers']} layers, "
             f"{len(plan)} tensors, {total / 2**30:.2f} GiB of {args.type} data")
        write_data(partial_out, plan, qtype, args.seed, w.data_alignment)
        partial_out.replace(out)
    except OSError as e:
        die(f"cannot write {out}: {e}")
    note(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
