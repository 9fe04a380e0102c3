#!/usr/bin/env python3
"""Parity with transformers on configurations nobody wrote by hand: for each
seed, a random small configuration of a random supported model type (head
counts, KV heads, head_dim, sliding windows and Qwen2-MoE window layers,
attention/qkv biases, shared experts 0/1/2, dense leading layers, grouped
routing, strongly negative DeepSeek-V3 correction biases, RoPE interleave,
linear and YaRN RoPE scaling, tied embeddings, keys left to their defaults)
is built with transformers' own model class, saved, compiled with
moe-compile and run with moe-run; the prefill logits must agree to 1e-4 and
the greedy tokens exactly. A configuration the importer refuses counts as a
refusal (listed with its one-line reason), never as a pass.

  parity-random-configs.py BIN_DIR [--seeds A:B] [--type MODEL_TYPE]

Needs torch and transformers (make check-transformers sets up .venv).
Exits 1 on any mismatch or crash.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

TYPES = ["mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"]
TOLERANCE = 1e-4


def random_config(model_type, rng):
    kw = dict(vocab_size=96, hidden_size=32, num_hidden_layers=rng.choice([2, 3]),
              num_attention_heads=4, max_position_embeddings=128, initializer_range=0.1,
              dtype="float32", tie_word_embeddings=rng.random() < 0.3)
    if rng.random() < 0.5:
        kw["rms_norm_eps"] = rng.choice([1e-5, 1e-6])
    if model_type in ("mixtral", "qwen2_moe", "qwen3_moe"):
        kw.update(num_key_value_heads=rng.choice([1, 2, 4]), intermediate_size=24)
    if model_type == "mixtral":
        kw.update(num_local_experts=rng.choice([4, 6]), num_experts_per_tok=2)
        if rng.random() < 0.5:
            kw["sliding_window"] = rng.choice([4, 6])
    if model_type in ("qwen2_moe", "qwen3_moe"):
        kw.update(num_experts=6, num_experts_per_tok=2, moe_intermediate_size=16,
                  norm_topk_prob=rng.random() < 0.5, decoder_sparse_step=rng.choice([1, 2]))
        if rng.random() < 0.5:
            kw.update(use_sliding_window=True, sliding_window=rng.choice([3, 5]))
            if model_type == "qwen2_moe":
                kw["max_window_layers"] = rng.choice([1, 2, 3])
    if model_type == "qwen2_moe":
        kw.update(shared_expert_intermediate_size=20, qkv_bias=rng.random() < 0.7)
    if model_type == "qwen3_moe":
        kw.update(head_dim=rng.choice([8, 12]), attention_bias=rng.random() < 0.5)
    if model_type.startswith("deepseek"):
        # transformers' eager MLA attention needs KV heads = heads.
        kw.update(num_key_value_heads=4, kv_lora_rank=16, qk_nope_head_dim=8,
                  qk_rope_head_dim=4, v_head_dim=8, n_routed_experts=8, num_experts_per_tok=2,
                  moe_intermediate_size=16, intermediate_size=24,
                  first_k_dense_replace=rng.choice([0, 1]), attention_bias=rng.random() < 0.3,
                  q_lora_rank=rng.choice([None, 16]))
        if rng.random() < 0.5:
            kw["n_shared_experts"] = rng.choice([0, 1, 2])
    if model_type == "deepseek_v2":
        if rng.random() < 0.5:
            kw.update(topk_method="group_limited_greedy", n_group=4, topk_group=2)
        kw["routed_scaling_factor"] = rng.choice([1.0, 1.5])
    if model_type == "deepseek_v3":
        kw.update(n_group=4, topk_group=2, rope_interleave=rng.random() < 0.7,
                  norm_topk_prob=rng.random() < 0.7)
    rope = rng.choice(["default", "linear", "yarn"])
    # transformers 5.24 cannot build Mixtral with YaRN (head_dim None).
    if rope == "yarn" and model_type == "mixtral":
        rope = "linear"
    if rope == "linear":
        kw["rope_parameters"] = dict(rope_type="linear", factor=2.0, rope_theta=10000.0)
    elif rope == "yarn":
        kw["rope_parameters"] = dict(rope_type="yarn", factor=4.0, rope_theta=10000.0,
                                     original_max_position_embeddings=32)
    return kw


def build(model_type, kw, seed):
    config = AutoConfig.for_model(model_type, **kw)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", experts_implementation="eager",
        dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + (torch.rand(p.shape, generator=gen) - 0.5) * 0.6)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):  # mostly negative
                b.copy_((torch.rand(b.shape, generator=gen) - 0.7) * 2)
    return model


def check(bin_dir, seed, model_type, work):
    rng = random.Random(seed)
    model_type = model_type or rng.choice(TYPES)
    kw = random_config(model_type, rng)
    model = build(model_type, kw, seed)
    ckpt = os.path.join(work, f"ckpt-{seed}")
    model.save_pretrained(ckpt)
    prompt = [rng.randrange(96) for _ in range(20)]
    with torch.no_grad():
        ref = model(torch.tensor([prompt])).logits[0]
        ids = torch.tensor([prompt])  # (an explicit mask: id 0 is no padding here)
        greedy = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                do_sample=False, eos_token_id=None,
                                pad_token_id=0)[0, len(prompt):].tolist()
    plan = os.path.join(work, f"plan-{seed}")
    r = subprocess.run([f"{bin_dir}/moe-compile", ckpt, "-o", plan], capture_output=True,
                       text=True)
    if r.returncode != 0:
        reason = r.stderr.strip().splitlines()
        ok = r.returncode == 1 and len(reason) == 1
        return ("refused" if ok else "crash"), f"{model_type}: {r.stderr.strip()[:300]}"
    logits = os.path.join(work, f"logits-{seed}.bin")
    r = subprocess.run([f"{bin_dir}/moe-run", plan, "--prompt-tokens", ",".join(map(str, prompt)),
                        "--max-new-tokens", "8", "--ignore-eos", "--dump-logits", logits,
                        "--json", "-"], capture_output=True, text=True)
    if r.returncode != 0:
        return "crash", f"{model_type}: moe-run: {r.stderr.strip()[:300]}"
    raw = open(logits, "rb").read()
    ours = torch.tensor(struct.unpack(f"<{len(raw) // 4}f", raw))[:len(prompt) * 96]
    err = (ours.view(len(prompt), 96) - ref).abs().max().item()
    tokens = json.loads(r.stdout)["generated_tokens"]
    shutil.rmtree(ckpt)
    shutil.rmtree(plan)
    if err > TOLERANCE or tokens != greedy:
        return "mismatch", f"{model_type}: max |logit error| {err:.3g}, tokens {tokens} vs {greedy}; {kw}"
    return "ok", f"{model_type}: max |logit error| {err:.2g}, 8 greedy tokens equal"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin_dir")
    ap.add_argument("--seeds", default="0:40")
    ap.add_argument("--type", choices=TYPES)
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.seeds.split(":"))
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    counts = {}
    with tempfile.TemporaryDirectory() as work:
        for seed in range(lo, hi):
            status, what = check(a.bin_dir, seed, a.type, work)
            counts[status] = counts.get(status, 0) + 1
            print(f"seed {seed}: {status}: {what}", flush=True)
    print("summary: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 1 if counts.get("mismatch") or counts.get("crash") else 0


if __name__ == "__main__":
    sys.exit(main())
