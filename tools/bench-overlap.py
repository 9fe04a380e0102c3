#!/usr/bin/env python3
"""Measured against predicted saving of two-batch overlap (issue 18).

  bench-overlap.py BIN_DIR WORK_DIR

The trained example compiled for 2 expert-parallel ranks, without and with
--overlap two-batch; each request one prefill step of 255 tokens (one
rank thread each: the 2 ranks fill this machine's cores), its all_reduce
over an emulated link (--emulate-link) of 20 us + B GB/s for B in 0.1,
0.2 and 0.4 (at 0.1 the link's time about equals the computation's).
For each link:
- measured: moe-bench --compare-to, both plans in turn, 7 rounds, the
  median ratio of their times (paired by round);
- predicted: moe-plan simulate of both plans on this machine's calibrated
  profile (moe-roofline --calibrate), the launches timed as a trace of
  the plan without overlap measured them (--measured), and on the cost
  model alone.
Prints one row per link with the relative error of the predicted saving,
and draws the measured and simulated timelines at 0.1 GB/s
(WORK_DIR/overlap-timeline.svg and .png)."""
import json
import os
import sys

from bench_common import MPIRUN, cpu_model, run

LINKS = ["20:0.1", "20:0.2", "20:0.4"]
TOKENS = 255
ROUNDS = 7
REQUESTS = 6


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ["PATH"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    example = os.path.join(root, "examples", "kjv-moe")
    flags = sorted(f for f in open("/proc/cpuinfo").read().split() if f.startswith("avx512"))
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, {len(flags)} avx512 flags; "
          f"2 ranks of 1 thread, loopback MPI")
    profile = os.path.join(work, "this-cpu.json")
    run("moe-roofline", "--calibrate", profile, "--threads", "1", "--triad-mib", "64")
    plain, overlap = os.path.join(work, "ep2"), os.path.join(work, "ep2-overlap")
    run("moe-compile", example, "-o", plain, "--ep", "2")
    run("moe-compile", example, "-o", overlap, "--ep", "2", "--overlap", "two-batch")
    prompt = ",".join(str(1 + i % 90) for i in range(TOKENS))
    measured = os.path.join(work, "launches.json")
    run(*MPIRUN, "-np", "2", "moe-run", plain, "--prompt-tokens", prompt, "--max-new-tokens", "1",
        "--threads", "1", "--trace", measured)
    print(f"| link | without overlap, ms/step | with, ms/step | measured saving | predicted "
          f"(--measured) | error | predicted (cost model alone) |")
    print("|---|---|---|---|---|---|---|")
    for link in LINKS:
        report = os.path.join(work, f"compare-{link.replace(':', '_')}.json")
        run(*MPIRUN, "-np", "2", "moe-bench", overlap, "--compare-to", plain, "--rounds",
            str(ROUNDS), "--concurrency", "1", "--requests", str(REQUESTS), "--prompt-len",
            f"{TOKENS}:{TOKENS}", "--output-len", "1:1", "--threads", "1", "--emulate-link", link,
            "--json", report)
        c = json.load(open(report))["levels"][0]["compared"]
        ratio = c["median_ratio"]
        base = sorted(c["other_seconds"])[ROUNDS // 2] / REQUESTS * 1e3
        saving = 1 - ratio
        predicted = {}
        for label, extra in (("measured", ["--measured", measured]), ("model", [])):
            sim = os.path.join(work, f"sim-{label}-{link.replace(':', '_')}.json")
            run("moe-plan", "simulate", overlap, "--hardware", profile, "--batch-tokens",
                str(TOKENS), "--link", link, "--baseline", plain, "--json", sim, *extra)
            s = json.load(open(sim))
            predicted[label] = 1 - s["step_seconds"] / s["baseline"]["step_seconds"]
        error = (predicted["measured"] - saving) / saving
        print(f"| {link} | {base:.1f} | {base * ratio:.1f} | {saving:.1%} | "
              f"{predicted['measured']:.1%} | {error:+.0%} | {predicted['model']:.1%} |")
    # The timelines at the first link: a measured step and the simulated one.
    link = LINKS[0]
    trace, simulated = os.path.join(work, "overlap-run.json"), os.path.join(work, "overlap-sim.json")
    run(*MPIRUN, "-np", "2", "moe-run", overlap, "--prompt-tokens", prompt, "--max-new-tokens",
        "1", "--threads", "1", "--emulate-link", link, "--trace", trace)
    run("moe-plan", "simulate", overlap, "--hardware", profile, "--batch-tokens", str(TOKENS),
        "--link", link, "--measured", measured, "--trace", simulated)
    print(run(sys.executable, os.path.join(root, "tools", "plot-timeline.py"), "--out",
              os.path.join(work, "overlap-timeline.svg"), "--step-tokens", str(TOKENS),
              f"measured: 2 ranks, two-batch overlap, link {link} (us:GB/s)={trace}",
              f"simulated: moe-plan simulate --measured, rank 0={simulated}").strip())


if __name__ == "__main__":
    main()
