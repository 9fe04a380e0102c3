#!/usr/bin/env python3
"""Expert placement as the runtime measures it (issue 17): the trained
example's experts placed over RANKS ranks from the routing of one part of
the held-out text, then run on another part under mpirun, each rank
counting the expert rows it computes (its experts', its replica's share of
a replicated one). Prints a markdown table: for each placement, the
max/mean of the ranks' rows per MoE layer (mean over the layers) that
`moe-plan placement --profile` predicts from the second part's own
profile, and that the ranks' counters measured; the bits per byte must be
the single-rank plan's (placement changes no bit).

  bench-placement-runtime.py BIN_DIR WORK_DIR [--ranks N] [--bytes N]

Placements: contiguous (`--ep N`), and from the first part's profile
(`--placement-profile`) with 0, N and 2N redundant slots.
"""
import argparse
import json
import os
import re
import sys

from bench_common import MPIRUN, run

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "kjv-moe")


def bits_per_byte(text):
    return float(re.search(r"([0-9.]+) bits per byte", text).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("work")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--bytes", type=int, default=40000, help="bytes of each part")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    tool = lambda name: os.path.join(a.bin, name)
    text = open(os.path.join(EXAMPLE, "heldout.txt"), "rb").read()
    parts = {}
    for name, piece in (("plan", text[:a.bytes]), ("run", text[a.bytes:2 * a.bytes])):
        parts[name] = os.path.join(a.work, name + ".txt")
        open(parts[name], "wb").write(piece)
    alone = os.path.join(a.work, "alone")
    run(tool("moe-compile"), EXAMPLE, "-o", alone)
    profiles = {}
    for name in parts:
        profiles[name] = os.path.join(a.work, name + ".profile.json")
        if os.path.exists(profiles[name]):
            os.remove(profiles[name])
        out = run(tool("moe-run"), alone, "--eval-file", parts[name], "--routing-profile",
                  profiles[name])
        if name == "run":
            want_bpb = bits_per_byte(out)
    n = a.ranks
    placements = [("contiguous (`--ep N`)", [])]
    for redundant in (0, n, 2 * n):
        placements.append((f"from the first part's profile, {redundant} redundant",
                           ["--placement-profile", profiles["plan"], "--redundant",
                            str(redundant)]))
    print(f"{n} ranks, the trained example (8 experts top-2, 4 MoE layers); placed from "
          f"held-out bytes [0, {a.bytes}), run on [{a.bytes}, {2 * a.bytes})\n")
    print("| placement | predicted max/mean | measured max/mean (runtime counters) | bits per byte |")
    print("|---|---|---|---|")
    for label, flags in placements:
        plan = os.path.join(a.work, f"ep{n}-{len(flags)}-{flags[-1] if flags else 'c'}")
        run(tool("moe-compile"), EXAMPLE, "-o", plan, "--ep", str(n), *flags)
        placed = os.path.join(a.work, "placement.json")
        run(tool("moe-plan"), "placement", plan, "--profile", profiles["run"], "--json", placed)
        predicted = json.load(open(placed))["summary"]["predicted_max_over_mean"]
        out = run(*MPIRUN, "-np", str(n), tool("moe-run"), plan, "--eval-file", parts["run"])
        measured = float(re.search(r"max/mean ([0-9.]+) per MoE layer", out).group(1))
        bpb = bits_per_byte(out)
        if bpb != want_bpb:
            sys.exit(f"{label}: {bpb} bits per byte; one rank {want_bpb}")
        print(f"| {label} | {predicted:.3f} | {measured:.3f} | {bpb:.4f} (as one rank) |")


if __name__ == "__main__":
    main()
