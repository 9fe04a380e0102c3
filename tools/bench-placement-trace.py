#!/usr/bin/env python3
"""Expert placement on production-shaped traffic, as the runtime measures
it (issue 17): the 64-expert routing trace of tools/make-routing-trace.py
(the hottest 8 experts carry 35% of the picks, the coldest 24 8%, drifting
from day to day) run through the runtime, day by day, and a placement
planned from days 1-7 judged on day 8 by the ranks' own counters.

The runtime routes tokens by the model's router, so each day's traffic is
made by a model that routes like that day: a DeepSeek-V3-shaped checkpoint
(64 routed experts, top-8, 4 MoE layers, random weights) whose router
selection bias (`e_score_correction_bias`, which decides the picks but not
their weights) is calibrated, run after run, until the routing profile the
runtime counts matches the day's share of every expert. Then:
- days 1-7 run through the runtime (moe-bench, one rank) make the routing
  profile a placement is planned from (`--routing-profile`);
- day 8's model is compiled over 8 ranks (2 nodes of 4), contiguous and
  placed from that profile with 0, 8 and 16 redundant slots, and runs day
  8's traffic under mpirun: each rank counts the rows it computes, and the
  max/mean of the ranks' rows per MoE layer is what they measured;
- `moe-plan placement --profile` predicts the same from day 8's profile
  (one rank), and from days 1-7's (the planned window).

Prints a markdown table.

  bench-placement-trace.py BIN_DIR WORK_DIR
"""
import argparse
import json
import math
import os
import re
import struct
import sys

from bench_common import MPIRUN, run

HERE = os.path.dirname(os.path.abspath(__file__))
RANKS, PER_NODE = 8, 4
ROUTER_GAIN = 30.0  # scales the router so that a token's scores differ enough
CALIBRATION_RUNS, STEP = 24, 0.08
TRAFFIC = ["--concurrency", "8", "--requests", "64", "--prompt-len", "64:64", "--output-len",
           "16:16", "--ignore-eos"]


def safetensors(path):
    raw = bytearray(open(path, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw, 8 + n


def write_day(base, out, bias):
    """`base` with the router scaled and the selection bias of each MoE
    layer set to `bias[layer]`."""
    header, raw, start = safetensors(os.path.join(base, "model.safetensors"))
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = (start + o for o in t["data_offsets"])
        if name.endswith("mlp.gate.weight"):
            values = struct.unpack(f"<{(b - a) // 4}f", raw[a:b])
            raw[a:b] = struct.pack(f"<{len(values)}f", *(v * ROUTER_GAIN for v in values))
        m = re.fullmatch(r"model\.layers\.(\d+)\.mlp\.gate\.e_score_correction_bias", name)
        if m:
            raw[a:b] = struct.pack(f"<{len(bias[int(m.group(1))])}f", *bias[int(m.group(1))])
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, "model.safetensors"), "wb").write(raw)
    open(os.path.join(out, "config.json"), "w").write(open(os.path.join(base, "config.json")).read())


def counts(profile):
    return {l["layer"]: l["counts"] for l in json.load(open(profile))["layers"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    a = ap.parse_args()
    bin_dir = os.path.abspath(a.bin)  # before the chdir below
    tool = lambda name: os.path.join(bin_dir, name)
    os.makedirs(a.work, exist_ok=True)
    os.chdir(a.work)

    def traffic(plan, seed, profile=None, launcher=()):
        extra = ["--routing-profile", profile] if profile else []
        return run(*launcher, tool("moe-bench"), plan, *TRAFFIC, "--seed", str(seed), *extra)

    run(sys.executable, os.path.join(HERE, "make-tiny-checkpoint.py"), "--model-type",
        "deepseek_v3", "--out", "base", "--dtype", "F32", "--dims", "n_routed_experts=64",
        "--dims", "num_experts_per_tok=8", "--dims", "n_group=1", "--dims", "topk_group=1",
        "--dims", "n_shared_experts=0", "--dims", "first_k_dense_replace=0",
        "--dims", "num_hidden_layers=4", "--dims", "vocab_size=512",
        "--dims", "max_position_embeddings=256")
    run(sys.executable, os.path.join(HERE, "make-routing-trace.py"), "-o", "trace.jsonl",
        "--layers", "4", "--days", "8", "--steps", "20", "--tokens", "2048")
    lines = [json.loads(l) for l in open("trace.jsonl")]
    experts, layers = lines[0]["num_experts"], lines[0]["layers"]
    worst = 0.0
    for day in range(1, 9):
        share = {l: [0.0] * experts for l in layers}
        for step in lines[1:]:
            if step["day"] == day:
                for i, l in enumerate(layers):
                    for e in range(experts):
                        share[l][e] += step["counts"][i][e]
        for l in layers:
            total = sum(share[l])
            share[l] = [c / total for c in share[l]]
        bias = {l: [0.0] * experts for l in layers}
        for it in range(CALIBRATION_RUNS + 1):
            write_day("base", f"day{day}", bias)
            run(tool("moe-compile"), f"day{day}", "-o", f"day{day}.plan")
            if it == CALIBRATION_RUNS:
                break
            if os.path.exists("calibration.json"):
                os.remove("calibration.json")
            traffic(f"day{day}.plan", 1000 + it, "calibration.json")
            got, error = counts("calibration.json"), 0.0
            for l in layers:
                total = sum(got[l])
                for e in range(experts):
                    error = max(error, abs(share[l][e] - got[l][e] / total))
                    bias[l][e] += STEP / (1 + it / 4) * math.log(
                        share[l][e] / ((got[l][e] + 0.5) / total))
        worst = max(worst, error)
    # Days 1-7 through the runtime: the profile a placement is planned from.
    for profile in ("days1-7.json", "day8.json"):
        if os.path.exists(profile):
            os.remove(profile)
    for day in range(1, 8):
        traffic(f"day{day}.plan", day, "days1-7.json")
    traffic("day8.plan", 8, "day8.json")
    c8 = counts("day8.json")
    hot = sum(sum(sorted(c, reverse=True)[:8]) / sum(c) for c in c8.values()) / len(c8)
    cold = sum(sum(sorted(c)[:24]) / sum(c) for c in c8.values()) / len(c8)
    print(f"{RANKS} ranks in nodes of {PER_NODE}; each day's routing calibrated to the trace's "
          f"within {worst:.4f} of the picks per expert; day 8 as the runtime routed it: the "
          f"hottest 8 experts carry {hot:.3f} of the picks, the coldest 24 {cold:.3f}\n")
    print("| placement | days 1-7, planned (moe-plan placement) | day 8, predicted "
          "(moe-plan placement) | day 8, measured (the ranks' counters) |")
    print("|---|---|---|---|")
    placements = [("contiguous (`--ep 8`)", [])] + [
        (f"placed from days 1-7, {r} redundant",
         ["--placement-profile", "days1-7.json", "--ranks-per-node", str(PER_NODE),
          "--redundant", str(r)]) for r in (0, 8, 16)]
    for label, flags in placements:
        plan = f"ep{RANKS}-" + (flags[-1] if flags else "contiguous")
        run(tool("moe-compile"), "day8", "-o", plan, "--ep", str(RANKS), *flags)
        predicted = []
        for profile in ("days1-7.json", "day8.json"):
            run(tool("moe-plan"), "placement", plan, "--profile", profile, "--json",
                "placement.json")
            predicted.append(json.load(open("placement.json"))["summary"]
                             ["predicted_max_over_mean"])
        out = traffic(plan, 8, launcher=MPIRUN + ["-np", str(RANKS)])
        measured = float(re.search(r"max/mean ([0-9.]+) per MoE layer", out).group(1))
        print(f"| {label} | {predicted[0]:.3f} | {predicted[1]:.3f} | {measured:.3f} |")


if __name__ == "__main__":
    main()
