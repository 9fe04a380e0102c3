#!/usr/bin/env python3
"""Batch-1 decode of the trained example beside busy processes.

Rounds of four runs, interleaved so that drift on a shared machine hits all
alike: quiet and beside BUSY busy-looping processes, each with the kernels'
default threads and with one thread. Prints every rate, each busy run of
the default threads as a ratio of their quiet median, the worst ratio, and
the same for one thread: one thread beside the busy loops is what the
machine gives a process that cannot be slowed by its own threads waiting
for each other.

  bench-contention.py BUILD_BIN [--rounds 5] [--busy N] [--tokens 240]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def decode_rate(bin_dir, plan, tokens, threads=0):
    cmd = [f"{bin_dir}/moe-run", plan, "--prompt", "And God said", "--max-new-tokens",
           str(tokens), "--ignore-eos"]
    if threads:
        cmd += ["--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"decode steps at ([0-9.]+) tokens/s", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--busy", type=int, default=os.cpu_count())
    ap.add_argument("--tokens", type=int, default=240)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        plan = f"{work}/plan"
        subprocess.run([f"{a.bin}/moe-compile", f"{HERE}/../examples/kjv-moe", "-o", plan],
                       check=True, capture_output=True)
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                    if l.startswith("model name")), "?")
        print(f"cpu: {cpu}, {os.cpu_count()} cores; {a.busy} busy loops; "
              f"{a.tokens} decode tokens per run")
        runs = {(mode, threads): [] for mode in ("quiet", "busy") for threads in (0, 1)}
        for r in range(a.rounds):
            for threads in (0, 1):
                runs["quiet", threads].append(decode_rate(a.bin, plan, a.tokens, threads))
            loops = [subprocess.Popen(["sh", "-c", "while :; do :; done"])
                     for _ in range(a.busy)]
            try:
                for threads in (0, 1):
                    runs["busy", threads].append(decode_rate(a.bin, plan, a.tokens, threads))
            finally:
                for p in loops:
                    p.kill()
                    p.wait()
            print(f"round {r + 1}: " + ", ".join(
                f"{mode} {'one thread' if t else 'all threads'} {runs[mode, t][-1]:.0f}"
                for mode in ("quiet", "busy") for t in (0, 1)) + " tok/s")
        for threads, name in ((0, "all threads"), (1, "one thread")):
            q = statistics.median(runs["quiet", threads])
            ratios = [b / q for b in runs["busy", threads]]
            print(f"{name}: quiet median {q:.0f} tok/s; busy / quiet: "
                  + " ".join(f"{x:.2f}" for x in ratios) + f"; worst {min(ratios):.2f}")


if __name__ == "__main__":
    sys.exit(main())
