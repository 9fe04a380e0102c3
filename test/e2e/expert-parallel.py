#!/usr/bin/env python3
"""Expert parallelism gives the single-rank plan's bits (standard library
only; the tools on PATH).

  expert-parallel.py MPIRUN GOLDENS EXAMPLE WORK RANKS

For each golden model type and for EXAMPLE, compiles the usual plan and,
for N in RANKS (e.g. 2,4), a plan with --ep N; checks that each rank's weight file
holds about 1/N of the experts (the experts' bytes split, the rest
replicated) and that the placement table puts every expert on exactly one
rank; runs the N-rank plan under MPIRUN -np N and the usual plan alone on
the same prompt with --dump-logits, and compares the logits byte for byte.
Then the same with experts placed from the usual plan's routing profile
(--placement-profile, --redundant R > 0): the hottest expert of every layer
has replicas, every rank as many slots, the logits are again the usual
plan's, and the routing counts the ranks make (each the rows it computes)
sum to the usual plan's. Prints one line per plan; exits 1 on the first difference.
"""
import json
import os
import re

from plan_checks import check_ranked_models, fail, logits, run

PROMPT = "1,7,3,9,11,2"
TRAFFIC = "5,17,2,40,8,1,23,11,3,30,9,14"  # routing profile for placement
STEPS = 4


def check(mpirun, name, checkpoint, work, rank_counts):
    alone = os.path.join(work, name + "-1")
    run("moe-compile", checkpoint, "-o", alone, "--max-context", "64")
    want = logits(alone, PROMPT, STEPS)
    profile = os.path.join(work, name + ".profile.json")
    run("moe-run", alone, "--prompt-tokens", TRAFFIC, "--max-new-tokens", "8", "--ignore-eos",
        "--routing-profile", profile)
    whole = json.loads(run("moe-plan", "json", alone))
    for ranks in rank_counts:
        plan = os.path.join(work, f"{name}-ep{ranks}")
        run("moe-compile", checkpoint, "-o", plan, "--max-context", "64", "--ep", str(ranks))
        p = json.loads(run("moe-plan", "json", plan))
        # Every routed expert on exactly one rank.
        for layer in p["placement"]:
            for e, slots in enumerate(layer["experts"]):
                if len(slots["slots"]) != 1:
                    fail(f"{name} ep {ranks}: layer {layer['layer']} expert {e} has slots "
                         f"{slots['slots']}")
        files = [f["size"] for f in p["weight_files"]]
        if len(files) != ranks or max(files) >= whole["weight_files"][0]["size"]:
            fail(f"{name} ep {ranks}: weight files {files}, one rank's alone "
                 f"{whole['weight_files'][0]['size']}")
        got = logits(plan, PROMPT, STEPS, mpirun + ["-np", str(ranks)])
        if not want or got != want:
            fail(f"{name} ep {ranks}: logits differ ({len(want)} and {len(got)} bytes)")
        # The ranks' counters of the rows each computes: the balance that
        # moe-plan placement predicts from the same traffic's profile.
        text = run(*mpirun, "-np", str(ranks), "moe-run", plan, "--prompt-tokens", TRAFFIC,
                   "--max-new-tokens", "8", "--ignore-eos")
        measured = float(re.search(r"max/mean ([0-9.]+) per MoE layer", text).group(1))
        placed = plan + ".placement.json"
        run("moe-plan", "placement", plan, "--profile", profile, "--json", placed)
        predicted = json.load(open(placed))["summary"]["predicted_max_over_mean"]
        if f"{measured:.3f}" != f"{predicted:.3f}":
            fail(f"{name} ep {ranks}: the ranks counted rows of max/mean {measured:.3f}; "
                 f"moe-plan placement predicts {predicted:.3f}")
        share = max(files) / whole["weight_files"][0]["size"]
        print(f"{name} ep {ranks}: logits identical; each expert on one rank; largest rank "
              f"file {share:.2f} of the whole; rows per rank as predicted (max/mean "
              f"{measured:.3f})")
        check_placed(mpirun, name, checkpoint, work, ranks, profile, want)


def check_placed(mpirun, name, checkpoint, work, ranks, profile, want):
    """--ep `ranks` placed from `profile` with replicas: the same bits."""
    counts = {l["layer"]: l["counts"] for l in json.load(open(profile))["layers"]}
    experts = len(next(iter(counts.values())))
    redundant = ranks - experts % ranks if experts % ranks else ranks
    plan = os.path.join(work, f"{name}-ep{ranks}-placed")
    run("moe-compile", checkpoint, "-o", plan, "--max-context", "64", "--ep", str(ranks),
        "--placement-profile", profile, "--redundant", str(redundant))
    p = json.loads(run("moe-plan", "json", plan))
    for layer in p["placement"]:
        slots = [s["slots"] for s in layer["experts"]]
        per_rank = [sum(1 for ss in slots for s in ss if s["rank"] == r) for r in range(ranks)]
        hot = max(range(experts), key=lambda e: (counts[layer["layer"]][e], -e))
        if len(set(per_rank)) != 1 or sum(per_rank) != experts + redundant or \
                len(slots[hot]) < 2:
            fail(f"{name} ep {ranks} placed: layer {layer['layer']} slots per rank "
                 f"{per_rank}, hottest expert {hot} on {slots[hot]}")
    got = logits(plan, PROMPT, STEPS, mpirun + ["-np", str(ranks)])
    if got != want:
        fail(f"{name} ep {ranks} placed: logits differ ({len(want)} and {len(got)} bytes)")
    # Each rank counts the rows it computes: summed, the single rank's counts.
    summed = plan + ".profile.json"
    run(*mpirun, "-np", str(ranks), "moe-run", plan, "--prompt-tokens", TRAFFIC,
        "--max-new-tokens", "8", "--ignore-eos", "--routing-profile", summed)
    got_counts = {l["layer"]: l["counts"] for l in json.load(open(summed))["layers"]}
    if got_counts != counts:
        fail(f"{name} ep {ranks} placed: the ranks' routing counts sum to {got_counts}, "
             f"one rank counted {counts}")
    print(f"{name} ep {ranks} placed, {redundant} redundant: logits identical; the hottest "
          f"expert of each layer replicated; routing counts summed over the ranks as one rank's")


if __name__ == "__main__":
    check_ranked_models(check)
