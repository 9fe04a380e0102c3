#!/usr/bin/env python3
"""Tensor parallelism, alone and with expert parallelism, gives the
single-rank plan's tokens (standard library only; the tools on PATH).

  tensor-parallel.py MPIRUN GOLDENS EXAMPLE WORK RANKS

For each golden model type and for EXAMPLE, compiles the usual plan and,
for N in RANKS (e.g. 2,4), plans with --tp N (attention heads, MLP and experts'
columns split) and with --ep N --tp M for each M > 1 dividing N (attention
and dense layers split over groups of M ranks, experts placed over all N);
runs each under MPIRUN -np N and the usual plan alone on the same prompt:
the greedy tokens must be the same and every logit within 1e-5 (the
all-reduces add the ranks' parts in another order than one rank adds
them). Each rank's weight file must be smaller than the whole plan's; the
routing counts of a --tp N run must be the single rank's. Prints one line
per plan with the largest difference and the largest rank file as a
fraction of the whole; exits 1 on the first failure.
"""
import json
import os

from plan_checks import check_ranked_models, fail, greedy, run, same_greedy_run

PROMPT = "1,7,3,9,11,2"
STEPS = 4
TOLERANCE = 1e-5


def generate(plan, profile, launcher=()):
    """The greedy run (tokens, logits) and the routing counts per layer."""
    tokens, logits, _ = greedy(plan, PROMPT, STEPS, launcher, "--routing-profile", profile)
    counts = {l["layer"]: l["counts"] for l in json.load(open(profile))["layers"]}
    return (tokens, logits), counts


def check(mpirun, name, checkpoint, work, rank_counts):
    alone = os.path.join(work, name + "-1")
    run("moe-compile", checkpoint, "-o", alone, "--max-context", "64")
    whole = json.loads(run("moe-plan", "json", alone))["weight_files"][0]["size"]
    want, counts = generate(alone, alone + ".profile.json")
    for ranks in rank_counts:
        # Tensor-parallel groups of every size that divides the ranks.
        layouts = [(f"tp {ranks}", ["--tp", str(ranks)])] + [
            (f"ep {ranks} + tp {m}", ["--ep", str(ranks), "--tp", str(m)])
            for m in range(ranks, 1, -1) if ranks % m == 0]
        for label, flags in layouts:
            plan = os.path.join(work, f"{name}-{label.replace(' ', '')}")
            run("moe-compile", checkpoint, "-o", plan, "--max-context", "64", *flags)
            files = [f["size"] for f in json.loads(run("moe-plan", "json", plan))["weight_files"]]
            if len(files) != ranks or max(files) >= whole:
                fail(f"{name} {label}: weight files {files}, one rank's alone {whole}")
            got, got_counts = generate(plan, plan + ".profile.json", mpirun + ["-np", str(ranks)])
            err = same_greedy_run(f"{name} {label}", got, want, TOLERANCE)
            if got_counts != counts:
                fail(f"{name} {label}: routing counts {got_counts}, one rank {counts}")
            print(f"{name} {label}: same tokens; logits within {err:.1g}; routing counts as one "
                  f"rank's; largest rank file {max(files) / whole:.2f} of the whole")


if __name__ == "__main__":
    check_ranked_models(check)
