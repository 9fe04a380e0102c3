#!/usr/bin/env python3
"""Measured against predicted saving of two-batch overlap (issues 18, 49).

  bench-overlap.py BIN_DIR WORK_DIR [--layouts ep,dp]

The trained example compiled for 2 ranks, without and with --overlap
two-batch, in two layouts:
- ep: expert parallelism, both ranks run every token, each MoE layer
  all-reduces the experts' rows; each request one prefill step of 255
  tokens (concurrency 1);
- dp: data-parallel attention (--dp-attention), each rank attends for its
  own requests and each MoE layer exchanges rows with all_to_all_v out and
  back; two requests at a time (one per rank), so each step is a prefill of
  255 tokens on each rank.
One rank thread each (the 2 ranks fill this machine's cores); the
collectives over an emulated link (--emulate-link) of 20 us + B GB/s for B
in 0.1, 0.2 and 0.4 (at 0.1 the link's time about equals the
computation's). For each layout and link:
- measured: moe-bench --compare-to, both plans in turn, 7 rounds, the
  median ratio of their times (paired by round);
- predicted: moe-plan simulate of both plans on this machine's calibrated
  profile (moe-roofline --calibrate), the launches timed as a trace of
  the plan without overlap measured them (--measured), and on the cost
  model alone.
Prints one row per link with the relative error of the predicted saving,
and draws the measured and simulated timelines of the ep layout at 0.1
GB/s (WORK_DIR/overlap-timeline.svg and .png)."""
import argparse
import json
import os
import sys

from bench_common import MPIRUN, cpu_model, run

LINKS = ["20:0.1", "20:0.2", "20:0.4"]
TOKENS = 255
ROUNDS = 7
REQUESTS = 6
# Per layout: moe-compile flags, and requests at a time (one per rank that
# attends for its own).
LAYOUTS = {"ep": (["--ep", "2"], 1), "dp": (["--ep", "2", "--dp-attention"], 2)}


def measure(layout, work, profile, example):
    """One layout's table: measured and predicted savings per link.
    Returns the plans and the trace of the plan without overlap."""
    flags, concurrency = LAYOUTS[layout]
    plain, overlap = os.path.join(work, layout), os.path.join(work, layout + "-overlap")
    run("moe-compile", example, "-o", plain, *flags)
    run("moe-compile", example, "-o", overlap, *flags, "--overlap", "two-batch")
    measured = os.path.join(work, f"{layout}-launches.json")
    # A traced step of TOKENS tokens on every rank that attends for its own.
    run(*MPIRUN, "-np", "2", "moe-bench", plain, "--concurrency", str(concurrency), "--requests",
        str(concurrency), "--prompt-len", f"{TOKENS}:{TOKENS}", "--output-len", "1:1",
        "--threads", "1", "--trace", measured)
    print(f"\n{layout}: moe-compile {' '.join(flags)}, {concurrency} request(s) at a time\n")
    print("| link | without overlap, ms/step | with, ms/step | measured saving | predicted "
          "(--measured) | error | predicted (cost model alone) |")
    print("|---|---|---|---|---|---|---|")
    for link in LINKS:
        report = os.path.join(work, f"{layout}-compare-{link.replace(':', '_')}.json")
        run(*MPIRUN, "-np", "2", "moe-bench", overlap, "--compare-to", plain, "--rounds",
            str(ROUNDS), "--concurrency", str(concurrency), "--requests", str(REQUESTS),
            "--prompt-len", f"{TOKENS}:{TOKENS}", "--output-len", "1:1", "--threads", "1",
            "--emulate-link", link, "--json", report)
        c = json.load(open(report))["levels"][0]["compared"]
        ratio = c["median_ratio"]
        steps = REQUESTS / concurrency
        base = sorted(c["other_seconds"])[ROUNDS // 2] / steps * 1e3
        saving = 1 - ratio
        predicted = {}
        for label, extra in (("measured", ["--measured", measured]), ("model", [])):
            sim = os.path.join(work, f"{layout}-sim-{label}-{link.replace(':', '_')}.json")
            run("moe-plan", "simulate", overlap, "--hardware", profile, "--batch-tokens",
                str(TOKENS), "--link", link, "--baseline", plain, "--json", sim, *extra)
            s = json.load(open(sim))
            predicted[label] = 1 - s["step_seconds"] / s["baseline"]["step_seconds"]
        error = (predicted["measured"] - saving) / saving
        print(f"| {link} | {base:.1f} | {base * ratio:.1f} | {saving:.1%} | "
              f"{predicted['measured']:.1%} | {error:+.0%} | {predicted['model']:.1%} |")
    return overlap, measured


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bin_dir")
    parser.add_argument("work")
    parser.add_argument("--layouts", default="ep,dp",
                        help="comma-separated, of: " + ", ".join(LAYOUTS))
    args = parser.parse_args()
    layouts = args.layouts.split(",")
    if any(l not in LAYOUTS for l in layouts):
        parser.error(f"--layouts takes {', '.join(LAYOUTS)}; got {args.layouts}")
    work = args.work
    os.makedirs(work, exist_ok=True)
    os.environ["PATH"] = args.bin_dir + os.pathsep + os.environ["PATH"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    example = os.path.join(root, "examples", "kjv-moe")
    flags = sorted(f for f in open("/proc/cpuinfo").read().split() if f.startswith("avx512"))
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, {len(flags)} avx512 flags; "
          f"2 ranks of 1 thread, loopback MPI")
    profile = os.path.join(work, "this-cpu.json")
    run("moe-roofline", "--calibrate", profile, "--threads", "1", "--triad-mib", "64")
    prompt = ",".join(str(1 + i % 90) for i in range(TOKENS))
    plans = {layout: measure(layout, work, profile, example) for layout in layouts}
    if "ep" not in plans:
        return
    overlap, measured = plans["ep"]
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
