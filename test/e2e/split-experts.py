#!/usr/bin/env python3
"""Split experts give the fused kernel's bits (standard library only; the
tools on PATH).

  split-experts.py GOLDENS EXAMPLE WORK

For each golden model type and for EXAMPLE (also with --precision int8 and
--no-fusion), compiles a plan as usual and one with --split-experts, checks
that every experts launch became one dispatch, one expert_rows and one
combine, runs both on the same prompt with --dump-logits and compares the
logits byte for byte. Prints one line per plan pair; exits 1 on the first
difference.
"""
import os
import re
import sys

from plan_checks import GOLDEN_TYPES, fail, logits, run

PROMPT = "1,7,3,9,11,2"
STEPS = 4


def launches(plan):
    """The instruction counts `moe-plan show` prints for rank 0."""
    line = next(l for l in run("moe-plan", "show", plan).splitlines() if l.startswith("program"))
    return {k: int(v) for k, v in re.findall(r"([A-Z][A-Za-z]+) (\d+)", line.split(":", 2)[2])}


def compare(name, checkpoint, work, flags):
    fused, split = os.path.join(work, name + "-fused"), os.path.join(work, name + "-split")
    common = ["--max-context", "64", *flags]
    run("moe-compile", checkpoint, "-o", fused, *common)
    run("moe-compile", checkpoint, "-o", split, "--split-experts", *common)
    a, b = launches(fused), launches(split)
    layers = a.get("Experts", 0)
    if layers < 1 or "Dispatch" in a:
        fail(f"{name}: the usual plan has {a}")
    if "Experts" in b or any(b.get(k) != layers for k in ("Dispatch", "ExpertRows", "Combine")):
        fail(f"{name}: {layers} experts launches became {b}")
    want, got = (logits(plan, PROMPT, STEPS) for plan in (fused, split))
    if not want or got != want:
        fail(f"{name}: logits differ ({len(want)} and {len(got)} bytes)")
    print(f"{name}: {layers} MoE layers split; logits identical (prefill and {STEPS} decode steps)")


def main():
    goldens, example, work = sys.argv[1:4]
    for model in GOLDEN_TYPES:
        compare(model, os.path.join(goldens, model), work, [])
    compare("kjv-moe", example, work, [])
    compare("kjv-moe --precision int8", example, work, ["--precision", "int8"])
    compare("kjv-moe --no-fusion", example, work, ["--no-fusion"])


if __name__ == "__main__":
    main()
