#!/usr/bin/env python3
"""Builds tiny random-weight MoE checkpoints with transformers' own model
classes and records reference (golden) logits and greedy generations for the
end-to-end tests.

For each model_type (mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3)
it writes test/e2e/goldens/<model_type>/ holding exactly:

  config.json        as written by save_pretrained
  model.safetensors  F32, default per-expert layout (save_original_format left
                     at its default)
  golden.json        {model_type, prompt, prefill_logits [8 x V],
                      greedy_tokens [16], greedy_logits [16 x V],
                      transformers_version, torch_version, seed,
                      recompute_max_abs_diff}

It also writes the VARIANTS below (a base type with one configuration field
set, smaller) to test/e2e/goldens/<name>/: with golden.json (plus "name")
for fields the importer supports, without it for fields it refuses; and
test/e2e/goldens/config-keys.json, every key transformers writes per type.

greedy_logits[i] are the raw logits that chose greedy_tokens[i] during a
KV-cached model.generate() (greedy_logits[0] is the prefill's last row).
recompute_max_abs_diff is the largest difference between greedy_logits and
the last 16 rows of one uncached forward over prompt + 15 generated tokens.
Floats are the exact float32 values, written as Python float reprs.

Besides transformers' own init, every RMSNorm weight is set to 1 + U(-0.3, 0.3)
and every bias (qwen2_moe q/k/v) to N(0, initializer_range), so that a
consumer that drops a norm weight or a bias gets different logits;
DeepSeek-V3's e_score_correction_bias (zeros in transformers) is set to
U(-0.1, 0.1) so that it changes the routing.

CI never runs this script: its output is committed. To regenerate:

  tools/setup-venv.sh
  .venv/bin/python tools/make-goldens.py --out test/e2e/goldens [--only TYPE]

The committed data was made with transformers 5.24.0, torch 2.15.0+cu132 run
on the CPU (float32, one thread), safetensors 0.8.0, numpy 2.4.6, Python 3.11.
The script asserts, per model: the greedy top-1/top-2 logit margin is > 1e-3
at every step, the cached generation matches an uncached recompute to 1e-5,
the routing uses several experts, the saved checkpoint reloads exactly (and,
for DeepSeek-V3, that the bias changes routing and is saved).
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile

import torch
import transformers
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

PROMPT = [1, 17, 42, 99, 5, 64, 23, 120]
NEW_TOKENS = 16
MIN_MARGIN = 1e-3       # top-1 minus top-2 logit at every greedy step
RECOMPUTE_TOL = 1e-5

COMMON = dict(
    vocab_size=128, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    max_position_embeddings=256, tie_word_embeddings=False, rms_norm_eps=1e-6,
    initializer_range=0.15, dtype="float32")

MODELS = {
    # intermediate_size 32, not 96: at 96 the 3 x 8 experts alone are 1.7 MiB.
    "mixtral": dict(
        seed=1001, rms_norm_eps=1e-5, num_key_value_heads=2,
        num_local_experts=8, num_experts_per_tok=2, intermediate_size=32,
        rope_parameters=dict(rope_type="default", rope_theta=1e6),
        sliding_window=8),
    "qwen2_moe": dict(
        seed=1002, num_key_value_heads=2, num_experts=6, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=80,
        intermediate_size=96, decoder_sparse_step=1, mlp_only_layers=[1],
        norm_topk_prob=False),
    "qwen3_moe": dict(
        seed=1012, num_key_value_heads=2, head_dim=24, num_experts=8,
        num_experts_per_tok=2, moe_intermediate_size=32, intermediate_size=96,
        decoder_sparse_step=2, norm_topk_prob=True, tie_word_embeddings=True),
    # num_experts_per_tok 3, not 2: with group score = max per group and
    # topk_group >= top_k, group-limited greedy always equals plain top-k.
    "deepseek_v2": dict(
        seed=1004, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=8,
        n_shared_experts=1, num_experts_per_tok=3, moe_intermediate_size=32,
        intermediate_size=96, first_k_dense_replace=1,
        topk_method="group_limited_greedy", n_group=4, topk_group=2,
        routed_scaling_factor=1.5,
        rope_parameters=dict(
            rope_type="yarn", rope_theta=10000.0, factor=4.0, mscale=0.707,
            mscale_all_dim=0.707, original_max_position_embeddings=64,
            beta_fast=32, beta_slow=1)),
    # moe_intermediate_size 24, not 32: keeps 2 x 16 experts near 1 MiB.
    "deepseek_v3": dict(
        seed=1005, num_key_value_heads=4, q_lora_rank=48, kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=16,
        n_shared_experts=1, num_experts_per_tok=4, moe_intermediate_size=24,
        intermediate_size=96, first_k_dense_replace=1, n_group=4,
        topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
}


# Configuration fields added or refused after the five base models: each is
# a smaller model of a base type with the field set. "golden": parity (a
# golden.json as above, checked by test/e2e/config-fields.test); without it
# the checkpoint is only written, for the test to assert the exact refusal.
SMALL = dict(hidden_size=32, num_hidden_layers=2)
SMALL_DEEPSEEK = dict(
    SMALL, q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8,
    qk_rope_head_dim=8, v_head_dim=8, n_routed_experts=8, n_group=4,
    topk_group=2, num_experts_per_tok=2, moe_intermediate_size=16,
    intermediate_size=48)
VARIANTS = {
    # q/k/v/o biases (o_proj's was dropped before).
    "qwen3_moe-attention-bias": dict(
        model_type="qwen3_moe", seed=2001, golden=True,
        config=dict(SMALL, attention_bias=True, head_dim=8, num_experts=4,
                    moe_intermediate_size=16, intermediate_size=48)),
    # Biases on q_a_proj, kv_a_proj_with_mqa and o_proj.
    "deepseek_v3-attention-bias": dict(
        model_type="deepseek_v3", seed=2002, golden=True,
        config=dict(SMALL_DEEPSEEK, attention_bias=True)),
    # RoPE on (i, i + d/2) pairs instead of (2i, 2i + 1).
    "deepseek_v3-no-interleave": dict(
        model_type="deepseek_v3", seed=2003, golden=True,
        config=dict(SMALL_DEEPSEEK, rope_interleave=False)),
    # Every biased score negative: transformers masks the unkept groups with
    # -inf, so a 0.0 mask would pick other experts.
    "deepseek_v3-negative-bias": dict(
        model_type="deepseek_v3", seed=2004, golden=True, bias_range=(-2.0, -1.0),
        config=dict(SMALL_DEEPSEEK)),
    # Sliding window on layer 0 only (every other layer below
    # max_window_layers), not on all layers.
    "qwen2_moe-window-layers": dict(
        model_type="qwen2_moe", seed=2005, golden=True,
        config=dict(SMALL, num_hidden_layers=3, use_sliding_window=True,
                    sliding_window=4, max_window_layers=2, num_experts=4,
                    moe_intermediate_size=16, shared_expert_intermediate_size=32,
                    intermediate_size=48, mlp_only_layers=[])),
    # n_shared_experts 0: transformers still saves the (empty) shared MLP's
    # tensors, [32, 0] and [0, 32]; they hold no weights and are skipped.
    "deepseek_v2-no-shared": dict(
        model_type="deepseek_v2", seed=2008, golden=True,
        config=dict(SMALL_DEEPSEEK, n_shared_experts=0, topk_method="greedy",
                    q_lora_rank=None)),
    # Refused: an activation other than SiLU.
    "qwen3_moe-gelu": dict(
        model_type="qwen3_moe", seed=2006, golden=False,
        config=dict(SMALL, hidden_act="gelu", head_dim=8, num_experts=4,
                    moe_intermediate_size=16, intermediate_size=48)),
    # Refused: biases on the MLP projections.
    "deepseek_v2-mlp-bias": dict(
        model_type="deepseek_v2", seed=2007, golden=False,
        config=dict(SMALL_DEEPSEEK, mlp_bias=True, topk_method="greedy",
                    q_lora_rank=None)),
}


def spec(name):
    """(model_type, seed, config kwargs, options) of a base model or variant."""
    if name in MODELS:
        m = MODELS[name]
        return name, m["seed"], {k: v for k, v in m.items() if k != "seed"}, {}
    v = VARIANTS[name]
    t = v["model_type"]
    kw = {k: x for k, x in MODELS[t].items() if k != "seed"}
    kw.update(v["config"])
    return t, v["seed"], kw, v


LOGS = []


def log(*a):
    LOGS.append(" ".join(str(x) for x in a))
    print(*a, flush=True)


def build(model_type, seed, overrides, bias_range=(-0.1, 0.1)):
    kw = dict(COMMON)
    kw.update(overrides)
    config = AutoConfig.for_model(model_type, **kw)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", experts_implementation="eager",
        dtype=torch.float32)
    model.eval()

    # Randomise what transformers initialises to constants.
    gen = torch.Generator().manual_seed(seed + 1)
    std = config.initializer_range
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + (torch.rand(p.shape, generator=gen) - 0.5) * 0.6)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * std)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                lo, hi = bias_range
                b.copy_(lo + torch.rand(b.shape, generator=gen) * (hi - lo))
    return model


class RouterTap:
    """Records (router_logits, weights, indices) of every `mlp.gate`."""

    def __init__(self, model):
        self.calls = {}
        self.handles = []
        for name, m in model.named_modules():
            if name.endswith("mlp.gate"):
                self.handles.append(m.register_forward_hook(self._hook(name)))

    def _hook(self, name):
        def f(_mod, _inp, out):
            self.calls.setdefault(name, []).append(
                tuple(t.detach().clone() for t in out))
        return f

    def clear(self):
        self.calls = {}

    def close(self):
        for h in self.handles:
            h.remove()


def routing_checks(model_type, model, tap):
    """Prints how many experts each MoE layer used; fails if every layer
    routed all tokens to the same experts."""
    cfg = model.config
    diverse = False
    for name, calls in tap.calls.items():
        logits, weights, idx = calls[-1]
        used = sorted(set(idx.flatten().tolist()))
        sets = {tuple(sorted(r)) for r in idx.tolist()}
        log(f"  {name}: {idx.shape[0]} tokens, experts used {used}, "
            f"{len(sets)} distinct top-k sets")
        if len(used) > cfg.num_experts_per_tok and len(sets) > 1:
            diverse = True
        k = cfg.num_experts_per_tok
        if model_type == "deepseek_v2":
            scores = logits.softmax(-1)
            plain = torch.topk(scores, k, -1).indices.sort(-1).values
            chg = (plain != idx.sort(-1).values).any(-1).sum().item()
            log(f"    group_limited_greedy differs from plain top-{k} "
                f"on {chg} tokens")
        if model_type == "deepseek_v3":
            gate = dict(model.named_modules())[name]
            scores = logits.sigmoid()
            ng, tg = cfg.n_group, cfg.topk_group

            def choose(s, masked=float("-inf")):
                g = s.view(-1, ng, s.shape[-1] // ng).topk(2, -1)[0].sum(-1)
                gi = torch.topk(g, tg, -1).indices
                gm = torch.zeros_like(g).scatter_(1, gi, 1)
                sm = gm.unsqueeze(-1).expand(-1, ng, s.shape[-1] // ng)
                s = s.masked_fill(~sm.reshape(s.shape).bool(), masked)
                return torch.topk(s, k, -1).indices.sort(-1).values

            got = idx.sort(-1).values
            with_bias = choose(scores + gate.e_score_correction_bias)
            no_bias = choose(scores)
            assert torch.equal(with_bias, got), "router re-derivation differs"
            chg = (no_bias != got).any(-1).sum().item()
            log(f"    e_score_correction_bias changes the choice on {chg} "
                f"tokens")
            assert chg > 0, "e_score_correction_bias does not change routing"
            zero = choose(scores + gate.e_score_correction_bias, 0.0)
            log(f"    masking unkept groups with 0.0 (transformers 4.x) "
                f"instead of -inf changes the choice on "
                f"{(zero != got).any(-1).sum().item()} tokens")
            flat = torch.topk(scores + gate.e_score_correction_bias, k,
                              -1).indices.sort(-1).values
            log(f"    group limit changes the choice on "
                f"{(flat != got).any(-1).sum().item()} tokens")
    assert diverse, f"{model_type}: routing uses the same experts everywhere"


def save(name, model, out_root):
    """Writes config.json and model.safetensors to out_root/name."""
    out = os.path.join(out_root, name)
    tmp = tempfile.mkdtemp(prefix=f"golden-{name}-")
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        for f in ("config.json", "model.safetensors"):
            shutil.copyfile(os.path.join(tmp, f), os.path.join(out, f))
    finally:
        shutil.rmtree(tmp)
    log(f"  wrote {out}")
    return out


def f32_list(t):
    return [float(x) for x in t.to(torch.float32).tolist()]


def dump_json(obj, path):
    """JSON with one matrix row per line."""
    def enc(v, indent):
        if isinstance(v, list) and v and isinstance(v[0], list):
            pad = " " * (indent + 2)
            rows = [pad + json.dumps(r) for r in v]
            return "[\n" + ",\n".join(rows) + "\n" + " " * indent + "]"
        return json.dumps(v)
    lines = [f'  {json.dumps(k)}: {enc(v, 2)}' for k, v in obj.items()]
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")


def make(name, out_root):
    model_type, seed, overrides, options = spec(name)
    log(f"== {name} (seed {seed})")
    model = build(model_type, seed, overrides,
                  options.get("bias_range", (-0.1, 0.1)))
    if not options.get("golden", True):
        save(name, model, out_root)
        return
    cfg = model.config
    tap = RouterTap(model)
    prompt = torch.tensor([PROMPT])

    with torch.no_grad():
        prefill = model(prompt, use_cache=False).logits[0]
        gc = GenerationConfig(
            do_sample=False, max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS, eos_token_id=None, bos_token_id=None,
            pad_token_id=0, use_cache=True)
        res = model.generate(
            prompt, attention_mask=torch.ones_like(prompt),
            generation_config=gc, output_logits=True,
            return_dict_in_generate=True)
        tokens = res.sequences[0, len(PROMPT):].tolist()
        glogits = torch.cat([l for l in res.logits], 0)
        assert len(tokens) == NEW_TOKENS and glogits.shape[0] == NEW_TOKENS
        assert torch.equal(glogits.argmax(-1), torch.tensor(tokens))

        tap.clear()
        full = torch.tensor([PROMPT + tokens[:-1]])
        recompute = model(full, use_cache=False).logits[0, -NEW_TOKENS:]
    diff = (recompute - glogits).abs().max().item()
    first = (glogits[0] - prefill[-1]).abs().max().item()
    top2 = glogits.topk(2, -1).values
    margin = (top2[:, 0] - top2[:, 1]).min().item()
    log(f"  tokens {tokens}")
    log(f"  recompute max|diff| {diff:.3g}, greedy[0] vs prefill[-1] "
        f"{first:.3g}, min top1-top2 margin {margin:.4g}, "
        f"max|logit| {prefill.abs().max().item():.3g}")
    assert torch.isfinite(glogits).all() and torch.isfinite(prefill).all()
    assert diff <= RECOMPUTE_TOL, f"recompute differs by {diff}"
    assert first <= RECOMPUTE_TOL, f"greedy[0] vs prefill differs by {first}"
    assert margin > MIN_MARGIN, f"greedy margin {margin} too small: new seed"
    routing_checks(model_type, model, tap)
    tap.close()
    if "bias_range" in options:
        zero = [l for l in LOGS if "instead of -inf" in l]
        assert zero and not zero[-1].endswith(" 0 tokens"), \
            "a 0.0 group mask would route the same: the variant tests nothing"
    if options.get("config", {}).get("use_sliding_window"):
        # Show that the per-layer window matters: every layer full.
        with torch.no_grad():
            types = list(cfg.layer_types)
            log(f"  layer_types {types}")
            cfg.layer_types = ["full_attention"] * len(types)
            full_attn = model(full, use_cache=False).logits[0]
            cfg.layer_types = types
            win = model(full, use_cache=False).logits[0]
        d = (full_attn - win).abs().max().item()
        log(f"  window layers vs no window: max|diff| {d:.3g}")
        assert d > 1e-3

    if model_type == "mixtral":
        # Show that the sliding window matters: same weights, no window.
        with torch.no_grad():
            cfg.sliding_window = None
            nowin = model(full, use_cache=False).logits[0]
            cfg.sliding_window = MODELS["mixtral"]["sliding_window"]
            win = model(full, use_cache=False).logits[0]
        w = cfg.sliding_window
        log(f"  window {w}: max|diff| vs no window, positions < {w}: "
            f"{(nowin[:w] - win[:w]).abs().max().item():.3g}, positions >= "
            f"{w}: {(nowin[w:] - win[w:]).abs().max().item():.3g}")
        assert (nowin[w:] - win[w:]).abs().max().item() > 1e-3

    out = save(name, model, out_root)
    st = os.path.join(out, "model.safetensors")
    with safe_open(st, "pt") as f:
        keys = list(f.keys())
        dtypes = {f.get_slice(k).get_dtype() for k in keys}
        assert dtypes == {"F32"}, dtypes
        if model_type == "deepseek_v3":
            bias = [k for k in keys if k.endswith("e_score_correction_bias")]
            assert bias and all(f.get_tensor(k).abs().max() > 0 for k in bias)
            log(f"  saved {len(bias)} nonzero e_score_correction_bias tensors")
        assert not any(".experts.gate_up_proj" in k for k in keys)
    # Reload what was written and check it reproduces the prefill.
    with torch.no_grad():
        again = AutoModelForCausalLM.from_pretrained(
            out, attn_implementation="eager",
            experts_implementation="eager").eval()
        rd = (again(prompt, use_cache=False).logits[0] - prefill).abs().max()
    assert rd.item() == 0.0, f"reloaded checkpoint differs by {rd.item()}"
    log(f"  {len(keys)} tensors, {os.path.getsize(st)} bytes; reload exact")

    golden = {
        "model_type": model_type,
        "name": name,
        "prompt": PROMPT,
        "prefill_logits": [f32_list(r) for r in prefill],
        "greedy_tokens": tokens,
        "greedy_logits": [f32_list(r) for r in glogits],
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seed": seed,
        "recompute_max_abs_diff": float(diff),
    }
    dump_json(golden, os.path.join(out, "golden.json"))


# Keys whose default the importer must take from transformers when a config
# leaves them out (test/unit/HfConfigTest.cpp compares).
DEFAULTED = ["num_key_value_heads", "rms_norm_eps", "max_position_embeddings",
             "n_shared_experts", "routed_scaling_factor", "first_k_dense_replace",
             "norm_topk_prob", "n_group", "topk_group", "qkv_bias",
             "decoder_sparse_step", "tie_word_embeddings", "rope_parameters"]


def write_config_keys(out_root):
    """config-keys.json: per model type, every key transformers' default
    config writes (to_dict) and every attribute_map alias, which the
    importer's key tables must hold, and the defaults of DEFAULTED
    (test/unit/HfConfigTest.cpp)."""
    keys, defaults = {}, {}
    for t in MODELS:
        config = AutoConfig.for_model(t)
        d = config.to_dict()
        keys[t] = sorted(set(d) | set(config.attribute_map))
        defaults[t] = {k: d[k] for k in DEFAULTED if d.get(k) is not None}
    path = os.path.join(out_root, "config-keys.json")
    with open(path, "w") as f:
        json.dump({"transformers_version": transformers.__version__,
                   "keys": keys, "defaults": defaults}, f, indent=1,
                  sort_keys=True)
        f.write("\n")
    log(f"== wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", choices=sorted(MODELS) + sorted(VARIANTS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    for t in ([args.only] if args.only else list(MODELS) + list(VARIANTS)):
        make(t, args.out)
    if not args.only:
        write_config_keys(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
