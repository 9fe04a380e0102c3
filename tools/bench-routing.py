#!/usr/bin/env python3
"""Routing alternatives on the trained example (issue 17): for token choice
(the checkpoint's own routing), capacity-limited token choice and expert
choice at several capacity factors, compiles examples/kjv-moe with
`moe-compile --routing P --capacity-factor F`, evaluates the held-out text
in windows of 256 tokens (each window one forward step of 256 tokens, the
batch the capacity is computed over), and prints a markdown table: bits
per byte, KL(token choice || this) per byte, top-1 agreement with token
choice, and the expert load the runtime counted (`--routing-profile`; pad
picks of expert choice included, they are computed): max/mean over the
experts of each MoE layer, averaged over the layers.

  bench-routing.py BIN_DIR WORK_DIR [--bytes N]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "kjv-moe")
CONFIGS = [("token_choice", 1.0), ("capacity", 1.0), ("capacity", 1.25), ("capacity", 2.0),
           ("expert_choice", 1.0), ("expert_choice", 1.25), ("expert_choice", 2.0)]


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--bytes", type=int, default=0, help="evaluate the first N bytes (0: all)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    text = os.path.join(EXAMPLE, "heldout.txt")
    if a.bytes:
        cut = os.path.join(a.work, "heldout-part.txt")
        with open(text, "rb") as f, open(cut, "wb") as g:
            g.write(f.read(a.bytes))
        text = cut
    tool = lambda name: os.path.join(a.bin, name)
    plans = {}
    for policy, factor in CONFIGS:
        plan = os.path.join(a.work, f"{policy}-{factor}")
        flags = [] if policy == "token_choice" else ["--routing", policy,
                                                       "--capacity-factor", str(factor)]
        run(tool("moe-compile"), EXAMPLE, "-o", plan, "--max-context", "256", *flags)
        plans[(policy, factor)] = plan
    reference = plans[("token_choice", 1.0)]
    print(f"examples/kjv-moe, {os.path.getsize(text)} bytes of heldout.txt in windows of 256 "
          "tokens (one step each)\n")
    print("| routing | capacity factor | bits per byte | KL vs token choice (nats/byte) | "
          "top-1 agreement | expert load max/mean |")
    print("|---|---|---|---|---|---|")
    for (policy, factor), plan in plans.items():
        profile = os.path.join(a.work, f"{policy}-{factor}.profile.json")
        if os.path.exists(profile):
            os.remove(profile)
        out = json.loads(run(tool("moe-run"), plan, "--eval-file", text, "--compare-to",
                             reference, "--routing-profile", profile, "--json", "-"))
        layers = json.load(open(profile))["layers"]
        imbalance = sum(max(l["counts"]) / (sum(l["counts"]) / len(l["counts"]))
                        for l in layers) / len(layers)
        shown = "-" if policy == "token_choice" else f"{factor:g}"
        print(f"| {policy.replace('_', ' ')} | {shown} | {out['bits_per_byte']:.4f} | "
              f"{out['kl']:.4f} | {100 * out['top1']:.2f}% | {imbalance:.3f} |")


if __name__ == "__main__":
    main()
