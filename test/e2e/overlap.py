#!/usr/bin/env python3
"""Two-batch overlap changes no bit (standard library only; the tools on
PATH).

  overlap.py MPIRUN GOLDENS EXAMPLE WORK RANKS

For each golden model type and for EXAMPLE, for N in RANKS (e.g. 2,4), compiles
plans with --ep N, --tp N and --ep N --tp N, each without and with
--overlap two-batch (and --micro-batches 3 for --ep N); runs each pair
under MPIRUN -np N on the same prompt (a prefill split into parts, then
decode steps of one token, whose first part is empty), the overlapped one
over an emulated link so that its collective stream lags: the logits
must be byte-identical and the routing counts equal. Placed from the --ep
N run's profile with redundant slots, each rank computes the same expert
rows with and without overlap (the rank report's counters). Prints one
line per plan; exits 1 on the first failure.
"""
import json
import os
import re

from plan_checks import check_ranked_models, fail, run

PROMPT = "1,7,3,9,11,2,5"
STEPS = 4


def generate(plan, launcher, *extra):
    """Every logits row of a greedy run, and the routing counts per layer."""
    out, profile = plan + ".logits", plan + ".profile.json"
    if os.path.exists(profile):
        os.remove(profile)
    run(*launcher, "moe-run", plan, "--prompt-tokens", PROMPT, "--max-new-tokens", str(STEPS),
        "--ignore-eos", "--dump-logits", out, "--routing-profile", profile, *extra)
    with open(out, "rb") as f:
        data = f.read()
    return data, {l["layer"]: l["counts"] for l in json.load(open(profile))["layers"]}


def check(mpirun, name, checkpoint, work, rank_counts):
    for ranks in rank_counts:
        launcher = mpirun + ["-np", str(ranks)]
        for label, flags, parts in ((f"ep {ranks}", ["--ep", str(ranks)], (2, 3)),
                                    (f"tp {ranks}", ["--tp", str(ranks)], (2,)),
                                    (f"ep {ranks} + tp {ranks}",
                                     ["--ep", str(ranks), "--tp", str(ranks)], (2,))):
            base = os.path.join(work, f"{name}-{label.replace(' ', '')}")
            run("moe-compile", checkpoint, "-o", base, "--max-context", "64", *flags)
            want, counts = generate(base, launcher)
            for k in parts:
                plan = f"{base}-overlap{k}"
                run("moe-compile", checkpoint, "-o", plan, "--max-context", "64", *flags,
                    "--overlap", "two-batch", "--micro-batches", str(k))
                streams = run("moe-plan", "show", plan)
                if "streams    rank 0: 2" not in streams:
                    fail(f"{name} {label} overlap {k}: the plan does not use two streams")
                got, got_counts = generate(plan, launcher, "--emulate-link", "300:1")
                if got != want:
                    fail(f"{name} {label} in {k} micro-batches: logits differ from without overlap")
                if got_counts != counts:
                    fail(f"{name} {label} in {k} micro-batches: routing counts {got_counts}, "
                         f"without overlap {counts}")
            print(f"{name} {label}: logits identical with overlap in "
                  f"{' and '.join(map(str, parts))} micro-batches; routing counts the same")
        # Placed with replicas: the micro-batches of a layer share its
        # replicas' row numbering, so each rank computes the rows it did.
        placed = os.path.join(work, f"{name}-ep{ranks}-placed")
        profile = os.path.join(work, f"{name}-ep{ranks}.profile.json")
        config = json.load(open(os.path.join(checkpoint, "config.json")))
        experts = next(config[k] for k in ("n_routed_experts", "num_local_experts", "num_experts")
                       if k in config)
        redundant = ranks + (-experts) % ranks  # slots split evenly over the ranks
        flags = ["--ep", str(ranks), "--placement-profile", profile, "--redundant", str(redundant)]
        run("moe-compile", checkpoint, "-o", placed, "--max-context", "64", *flags)
        run("moe-compile", checkpoint, "-o", placed + "-overlap", "--max-context", "64", *flags,
            "--overlap", "two-batch")
        want = run(*launcher, "moe-run", placed, "--prompt-tokens", PROMPT, "--max-new-tokens",
                   str(STEPS), "--ignore-eos")
        got = run(*launcher, "moe-run", placed + "-overlap", "--prompt-tokens", PROMPT,
                  "--max-new-tokens", str(STEPS), "--ignore-eos")
        rows = lambda text: re.findall(r"expert rows \d+|max/mean [0-9.]+", text)
        if not rows(want) or rows(got) != rows(want):
            fail(f"{name} ep {ranks} placed: expert rows per rank {rows(got)}, without overlap "
                 f"{rows(want)}")
        print(f"{name} ep {ranks} placed, {redundant} redundant: each rank's expert rows as without overlap")


if __name__ == "__main__":
    check_ranked_models(check)
