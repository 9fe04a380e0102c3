#!/usr/bin/env python3
"""Trains a small byte-level Qwen3-MoE on the King James Bible and saves it in
Hugging Face format (safetensors + ByT5 byte tokenizer + model card).

Run by hand, not by CI (about 30 minutes on 2 CPU cores):

    apt-get install bible-kjv
    python3 -m venv .venv && .venv/bin/pip install torch transformers safetensors
    .venv/bin/python examples/train_tiny_moe.py --out examples/kjv-moe

Corpus: `bible -f "Gen1:1-Rev22:21"` (Debian package bible-kjv; public domain),
4.4 MB, one verse per line. Split by line: the first 95% trains, the last 5%
is held out (examples/kjv-moe/heldout.txt). Tokens are ByT5's: byte + 3, with
pad 0, eos 1, unk 2 (vocabulary 259).

Evaluation (the same procedure as `moe-run --eval-file`): the text's bytes are
cut into consecutive windows of WINDOW - 1 bytes; each window is fed as
[eos] + bytes and every byte is predicted from the ones before it in its
window. bits per byte = total negative log-likelihood / ln 2 / bytes.

Everything is seeded; reruns give the same weights up to float noise from
thread scheduling (not bit for bit).
The weights are stored in bf16 (6.6 MB instead of 13 MB: the repository keeps
data files under 8 MiB), and eval.json measures the stored weights (computed
in fp32). `--store-bf16 DIR` does that step alone for a model saved in fp32.
"""
import argparse
import json
import math
import os
import subprocess
import time

import torch
from transformers import ByT5Tokenizer, Qwen3MoeConfig, Qwen3MoeForCausalLM

WINDOW = 256
OFFSET = 3  # ByT5: token = byte + 3
EOS = 1


def corpus():
    text = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True,
                          capture_output=True).stdout
    lines = text.splitlines(keepends=True)
    cut = int(len(lines) * 0.95)
    return b"".join(lines[:cut]), b"".join(lines[cut:])


def windows(data):
    """[eos] + up to WINDOW - 1 bytes, consecutive, as token lists."""
    step = WINDOW - 1
    return [[EOS] + [b + OFFSET for b in data[i:i + step]]
            for i in range(0, len(data), step)]


@torch.no_grad()
def bits_per_byte(model, data, batch=16):
    model.eval()
    nll, count = 0.0, 0
    ws = windows(data)
    for i in range(0, len(ws), batch):
        group = ws[i:i + batch]
        for w in group:  # windows differ in length only at the end
            ids = torch.tensor([w])
            logits = model(ids).logits.double()
            logp = torch.log_softmax(logits[0, :-1], dim=-1)
            target = ids[0, 1:]
            nll -= logp.gather(1, target[:, None]).sum().item()
            count += len(target)
    model.train()
    return nll / math.log(2) / count, count


def sample_text(model):
    prompt = "And God said"
    ids = torch.tensor([[EOS] + [b + OFFSET for b in prompt.encode()]])
    model.eval()
    with torch.no_grad():
        gen = model.generate(ids, max_new_tokens=160, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
    sample = bytes(t - OFFSET for t in gen[0, 1:].tolist() if t >= OFFSET)
    return prompt, sample.decode("utf-8", errors="replace")


def store_bf16(out):
    """Rounds the model in `out` to bf16, saves it so, and measures the held-out
    bits per byte and the greedy sample of the stored weights in eval.json."""
    model = Qwen3MoeForCausalLM.from_pretrained(out, dtype=torch.float32)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    model = model.float()  # the stored values, computed in fp32
    model.config.output_router_logits = False
    heldout = open(os.path.join(out, "heldout.txt"), "rb").read()
    bpb, count = bits_per_byte(model, heldout)
    info = json.load(open(os.path.join(out, "eval.json")))
    prompt, sample = sample_text(model)
    info.update({"heldout_bits_per_byte": bpb, "heldout_bytes": count,
                 "stored_dtype": "bfloat16", "greedy_sample_prompt": prompt,
                 "greedy_sample": sample})
    info.pop("train_bits_per_byte", None)  # of the fp32 weights; the corpus is not here
    json.dump(info, open(os.path.join(out, "eval.json"), "w"), indent=2)
    print(f"stored in bf16; held-out bits/byte {bpb:.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="examples/kjv-moe")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=35 * 60,
                    help="stop early (seconds) to stay within the budget")
    ap.add_argument("--store-bf16", metavar="DIR",
                    help="only round the fp32 model in DIR to bf16 and re-measure it")
    a = ap.parse_args()
    if a.store_bf16:
        torch.set_num_threads(a.threads)
        return store_bf16(a.store_bf16)

    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    train, heldout = corpus()
    print(f"corpus: {len(train)} train bytes, {len(heldout)} held-out bytes")

    config = Qwen3MoeConfig(
        vocab_size=256 + OFFSET, hidden_size=160, intermediate_size=480,
        moe_intermediate_size=192, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=40, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=True, decoder_sparse_step=1, max_position_embeddings=WINDOW,
        rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
        output_router_logits=True, router_aux_loss_coef=0.01,
        bos_token_id=EOS, eos_token_id=EOS, pad_token_id=0,
        initializer_range=0.02, torch_dtype="float32")
    model = Qwen3MoeForCausalLM(config)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {params} parameters")

    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95),
                            weight_decay=0.1)
    warmup = 200
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) *
        (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, a.steps) / a.steps))))
    data = torch.tensor(list(train), dtype=torch.long) + OFFSET
    g = torch.Generator().manual_seed(a.seed)
    start = time.monotonic()
    step = 0
    for step in range(a.steps):
        idx = torch.randint(0, len(data) - WINDOW, (a.batch,), generator=g)
        x = torch.stack([torch.cat([torch.tensor([EOS]), data[i:i + WINDOW - 1]])
                         for i in idx.tolist()])
        out = model(x, labels=x)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 50 == 0:
            el = time.monotonic() - start
            print(f"step {step} loss {out.loss.item():.4f} "
                  f"({out.loss.item() / math.log(2):.3f} bits) {el:.0f}s", flush=True)
        if time.monotonic() - start > a.time_limit:
            print(f"time limit reached at step {step}")
            break
    trained_steps = step + 1
    minutes = (time.monotonic() - start) / 60

    model.config.output_router_logits = False
    heldout_bpb, heldout_bytes = bits_per_byte(model, heldout)
    train_bpb, train_bytes = bits_per_byte(model, train[:len(heldout)])
    print(f"held-out bits/byte {heldout_bpb:.4f} over {heldout_bytes} bytes; "
          f"train (first {train_bytes} bytes) {train_bpb:.4f}")

    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)
    ByT5Tokenizer(extra_ids=0).save_pretrained(a.out)
    for extra in ("generation_config.json",):
        p = os.path.join(a.out, extra)
        if os.path.exists(p):
            os.remove(p)
    open(os.path.join(a.out, "heldout.txt"), "wb").write(heldout)

    prompt, sample = sample_text(model)
    print("sample:", sample)

    json.dump({"heldout_bits_per_byte": heldout_bpb, "heldout_bytes": heldout_bytes,
               "train_bits_per_byte": train_bpb, "window": WINDOW,
               "steps": trained_steps, "batch": a.batch, "minutes": minutes,
               "seed": a.seed, "parameters": params,
               "torch": torch.__version__,
               "transformers": __import__("transformers").__version__,
               "greedy_sample_prompt": prompt, "greedy_sample": sample},
              open(os.path.join(a.out, "eval.json"), "w"), indent=2)
    store_bf16(a.out)


if __name__ == "__main__":
    main()
