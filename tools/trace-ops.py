#!/usr/bin/env python3
"""Where the steps of a trace-event file (moe-run, moe-bench or moe-serve
--trace) spend their time: for every rank, each instruction's total duration
over the steps of N tokens, per step and as a share, the LM head apart from
the other linear layers (by its location). Standard library only.

  trace-ops.py TRACE --step-tokens N [--json]

A step's time here is the sum of its spans on every stream of the rank, so
streams that overlap count twice; the share is of that sum."""
import argparse
import collections
import json
import sys


def op_name(event):
    name = event["name"]
    if name == "linear" and "lm_head" in event.get("args", {}).get("at", ""):
        return "lm_head"
    return name


def breakdown(events, tokens):
    """{rank: (steps, {op: total microseconds})} over the steps of `tokens` tokens."""
    steps = collections.defaultdict(set)
    totals = collections.defaultdict(lambda: collections.defaultdict(float))
    for e in events:
        args = e.get("args", {})
        if e.get("ph") != "X" or args.get("tokens") != tokens:
            continue
        steps[e["pid"]].add(args.get("step", 0))
        totals[e["pid"]][op_name(e)] += e["dur"]
    return {rank: (len(steps[rank]), dict(ops)) for rank, ops in totals.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--step-tokens", type=int, required=True,
                    help="the steps measured: those of this many tokens")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args()
    try:
        events = json.load(open(a.trace))["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        sys.exit(f"trace-ops: {a.trace} is not a trace-event file: {err}")
    result = breakdown(events, a.step_tokens)
    if not result:
        sys.exit(f"trace-ops: {a.trace} has no step of {a.step_tokens} tokens "
                 "(--step-tokens: the batch's token count)")
    report = {}
    for rank in sorted(result):
        steps, ops = result[rank]
        total = sum(ops.values())
        report[rank] = {
            "steps": steps,
            "ms_per_step": total / steps / 1000,
            "ops": {op: {"ms_per_step": us / steps / 1000, "share": us / total}
                    for op, us in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))},
        }
    if a.json:
        print(json.dumps({str(rank): r for rank, r in report.items()}, indent=1))
        return
    for rank, r in report.items():
        print(f"rank {rank}: {r['steps']} steps of {a.step_tokens} tokens, "
              f"{r['ms_per_step']:.2f} ms a step")
        for op, o in r["ops"].items():
            print(f"  {op:18s} {o['ms_per_step']:9.3f} ms  {100 * o['share']:5.1f}%")


if __name__ == "__main__":
    main()
