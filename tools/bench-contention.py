#!/usr/bin/env python3
"""Batch-1 decode of the trained example beside busy processes.

Rounds of four runs, interleaved so that drift on a shared machine hits all
alike: quiet and beside BUSY busy-looping processes, each with the kernels'
default threads and with one thread. A run is `moe-bench --concurrency 1`:
REQUESTS requests of a 4-token prompt and TOKENS decode tokens each, about
a second of decoding, long enough to span many scheduler time slices.
Prints every rate, each busy run of the default threads as a ratio of their
quiet median, the worst ratio, and the same for one thread: one thread
beside the busy loops is what the machine gives a process that cannot be
slowed by its own threads waiting for each other. With --vs OTHER_BIN
(another build's bin directory) its default threads run in every round
too, for a before/after comparison measured in the same rounds.

  bench-contention.py BUILD_BIN [--vs OTHER_BIN] [--rounds 5] [--busy N]
                      [--requests 20] [--tokens 240]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from bench_common import cpu_model

HERE = os.path.dirname(os.path.abspath(__file__))


def decode_rate(bin_dir, plan, requests, tokens, threads=0):
    cmd = [f"{bin_dir}/moe-bench", plan, "--concurrency", "1", "--requests", str(requests),
           "--prompt-len", "4:4", "--output-len", f"{tokens}:{tokens}", "--ignore-eos",
           "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"decode ([0-9.]+) tok/s", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--busy", type=int, default=os.cpu_count())
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=240)
    ap.add_argument("--vs", metavar="OTHER_BIN")
    a = ap.parse_args()
    variants = [("all threads", a.bin, 0), ("one thread", a.bin, 1)]
    if a.vs:
        variants.append((f"all threads of {a.vs}", a.vs, 0))
    with tempfile.TemporaryDirectory() as work:
        plan = f"{work}/plan"
        subprocess.run([f"{a.bin}/moe-compile", f"{HERE}/../examples/kjv-moe", "-o", plan],
                       check=True, capture_output=True)
        cpu = cpu_model()
        print(f"cpu: {cpu}, {os.cpu_count()} cores; {a.busy} busy loops; "
              f"{a.requests} requests of {a.tokens} decode tokens per run")
        runs = {(mode, v): [] for mode in ("quiet", "busy") for v in variants}
        for r in range(a.rounds):
            for v in variants:
                runs["quiet", v].append(decode_rate(v[1], plan, a.requests, a.tokens, v[2]))
            loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
                     for _ in range(a.busy)]
            try:
                for v in variants:
                    runs["busy", v].append(decode_rate(v[1], plan, a.requests, a.tokens, v[2]))
            finally:
                for p in loops:
                    p.kill()
                    p.wait()
            print(f"round {r + 1}: " + ", ".join(
                f"{mode} {v[0]} {runs[mode, v][-1]:.0f}"
                for mode in ("quiet", "busy") for v in variants) + " tok/s", flush=True)
        for v in variants:
            name = v[0]
            q = statistics.median(runs["quiet", v])
            ratios = [b / q for b in runs["busy", v]]
            print(f"{name}: quiet median {q:.0f} tok/s; busy / quiet: "
                  + " ".join(f"{x:.2f}" for x in ratios) + f"; worst {min(ratios):.2f}")


if __name__ == "__main__":
    sys.exit(main())
