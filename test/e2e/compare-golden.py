#!/usr/bin/env python3
"""Compares a moe-run result with a Hugging Face golden (standard library only).

  compare-golden.py GOLDEN_JSON RUN_JSON LOGITS_BIN [--tolerance 1e-4]

RUN_JSON is `moe-run --json` output; LOGITS_BIN its --dump-logits file: the
prompt's rows, then one row per decode step, little-endian f32. Checks:
prefill logits (every prompt row), the greedy tokens exactly, and the logits
that chose each greedy token. Prints the largest errors; exits 1 on mismatch.
"""
import argparse
import json
import struct
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("golden")
    ap.add_argument("run")
    ap.add_argument("logits")
    ap.add_argument("--tolerance", type=float, default=1e-4)
    a = ap.parse_args()
    golden = json.load(open(a.golden))
    run = json.load(open(a.run))
    vocab = len(golden["prefill_logits"][0])
    raw = open(a.logits, "rb").read()
    if len(raw) % (4 * vocab):
        sys.exit(f"{a.logits}: {len(raw)} bytes is not a whole number of {vocab}-float rows")
    floats = struct.unpack(f"<{len(raw) // 4}f", raw)
    rows = [floats[i:i + vocab] for i in range(0, len(floats), vocab)]
    prompt = len(golden["prompt"])
    steps = len(golden["greedy_tokens"])
    if len(rows) != prompt + steps - 1:
        sys.exit(f"{a.logits}: {len(rows)} rows, expected {prompt + steps - 1}")

    def max_err(ours, theirs):
        return max(abs(x - y) for r, g in zip(ours, theirs) for x, y in zip(r, g))

    ok = True
    prefill = max_err(rows[:prompt], golden["prefill_logits"])
    # greedy_logits[0] is the last prompt row; then one row per decode step.
    greedy = max_err([rows[prompt - 1]] + rows[prompt:], golden["greedy_logits"])
    name = golden.get("name", golden["model_type"])
    print(f"{name}: prefill logits max abs err {prefill:.3g}, "
          f"greedy-step logits max abs err {greedy:.3g} (tolerance {a.tolerance:g})")
    if prefill > a.tolerance or greedy > a.tolerance:
        ok = False
    if run["prompt_tokens"] != golden["prompt"]:
        print(f"prompt differs: {run['prompt_tokens']} vs {golden['prompt']}")
        ok = False
    if run["generated_tokens"] != golden["greedy_tokens"]:
        print(f"greedy tokens differ:\n  ours   {run['generated_tokens']}\n"
              f"  golden {golden['greedy_tokens']}")
        ok = False
    else:
        print(f"{name}: {steps} greedy tokens identical")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
