#!/usr/bin/env python3
"""Compares a multi-rank moe-bench run with the single-rank one (standard
library only; the tools on PATH).

  bench-ranks.py ONE_BENCH N_BENCH ONE_PROFILE N_PROFILE ONE_PLAN N_PLAN

The level reports (moe-bench --json) must agree in generated tokens and
finish reasons, the routing profiles in every count, and each rank of
N_PLAN must state fewer weight bytes than ONE_PLAN's one rank.
"""
import json
import sys

from plan_checks import fail, run


def main():
    one_bench, n_bench, one_profile, n_profile, one_plan, n_plan = sys.argv[1:7]
    a, b = json.load(open(one_bench))["levels"], json.load(open(n_bench))["levels"]
    if len(a) != len(b):
        fail(f"{len(a)} and {len(b)} levels")
    for x, y in zip(a, b):
        for key in ("generated_tokens", "finish_reasons", "completed"):
            if x[key] != y[key]:
                fail(f"level {x.get('level')}: {key} {x[key]} on one rank, {y[key]} on several")
    p, q = json.load(open(one_profile)), json.load(open(n_profile))
    if p["layers"] != q["layers"] or p["tokens"] != q["tokens"]:
        fail(f"routing counts differ: {p['layers']} and {q['layers']}")
    whole = json.loads(run("moe-plan", "json", one_plan))["programs"][0]["weight_bytes"]
    ranks = [r["weight_bytes"] for r in json.loads(run("moe-plan", "json", n_plan))["programs"]]
    if max(ranks) >= whole:
        fail(f"rank weights {ranks}, the whole {whole}")
    print(f"generated tokens and finish reasons as one rank's at every level; routing counts "
          f"summed over {q['last_window']['ranks']} ranks as one rank's; largest rank's "
          f"weights {max(ranks) / whole:.2f} of the whole")


if __name__ == "__main__":
    main()
