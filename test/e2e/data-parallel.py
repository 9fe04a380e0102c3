#!/usr/bin/env python3
"""Data-parallel attention with expert parallelism gives the single-rank
plan's bits, spreads requests over the ranks, and moves the closed form's
bytes (standard library only; the tools on PATH).

  data-parallel.py MPIRUN GOLDENS EXAMPLE WORK RANKS

For each golden model type and for EXAMPLE, and N in RANKS (e.g. 2,4), compiles
--ep N --dp-attention (each rank attends for its own sequences; every MoE
layer sends each row to the rank of its expert and back with all_to_all_v):
- moe-run under MPIRUN -np N (rank 0 runs the sequence, the others serve
  their experts' rows): logits identical to the single-rank plan's, byte
  for byte; the same routing counts; and the bytes the ranks hand to the
  exchanges are the closed form: every row of a remote expert goes out with
  its slot (4 H + 4 bytes) and comes back (4 H), where the remote rows are
  counted from the single-rank run's routing and the plan's expert_rows
  (which rank holds each stacked expert, shared ones included);
- moe-bench, closed loop, requests spread over the ranks (request i on rank
  i mod N): every request's generated tokens identical to the single-rank
  run's;
- the same plan placed from the single-rank run's routing profile
  (--placement-profile, enough --redundant slots to replicate experts):
  the logits, routing counts and moe-bench tokens again (a row goes to its
  own rank's replica when there is one, always-on experts included, else
  to a replica its token picks).
Prints one line per plan; exits 1 on the first failure.
"""
import json
import os
import re

from plan_checks import check_ranked_models, fail, greedy, logits, run

PROMPT = "1,7,3,9,11,2"
STEPS = 4
BENCH = ["--concurrency", "3", "--requests", "7", "--prompt-len", "5:12", "--output-len",
         "4:8", "--ignore-eos"]


def profile_counts(path):
    return {l["layer"]: l["counts"] for l in json.load(open(path))["layers"]}


def layers_of(plan_json):
    """Per MoE layer: the rank holding each stacked expert (every rank's
    expert_rows), the routed and always-on experts, top-k and row width."""
    layers = {}
    for prog in plan_json["programs"]:
        for inst in prog["instructions"]:
            p = inst.get("params") or {}
            if inst.get("op") == "ExpertRows":
                owner = layers.setdefault(p["layer"], {"owner": {}})["owner"]
                for e in p["held"]:
                    owner[e] = prog["rank"]
    insts = plan_json["programs"][0]["instructions"]
    routers = [i["params"] for i in insts if i.get("op") == "Router"]
    dispatches = [i for i in insts if i.get("op") == "Dispatch"]
    for router, d in zip(routers, dispatches):
        layer = layers[router["layer"]]
        layer["top_k"] = router["top_k"]
        layer["experts"] = d["params"]["num_experts"]
        layer["shared"] = d["params"]["num_shared"]
        layer["width"] = plan_json["tensors"][d["outputs"][0]]["shape"][2]
    return layers


def remote_rows(counts, layers, rank):
    """Rows a sequence on `rank` sends to other ranks: its routed picks of
    experts held elsewhere, and one row per token of each always-on expert
    held elsewhere."""
    rows = 0
    for layer, c in counts.items():
        info = layers[layer]
        rows += sum(n for e, n in enumerate(c) if info["owner"][e] != rank)
        tokens = sum(c) // info["top_k"]
        rows += tokens * sum(1 for j in range(info["shared"])
                             if info["owner"][info["experts"] + j] != rank)
    return rows


def check_plan(plan, label, ranks, launcher, link, want, counts, bench_alone):
    """A --dp-attention plan of `ranks` under `launcher` (moe-run and moe-bench flags
    `link`): the single-rank run's logits `want` and routing `counts`,
    the closed form's exchange bytes, and moe-bench's tokens as one rank's
    (`bench_alone`). Returns the remote rows and the bytes exchanged."""
    if logits(plan, PROMPT, STEPS, launcher, *link) != want:
        fail(f"{label}: logits differ from one rank's")
    text = same_counts_and_tokens(plan, label, launcher, link, counts, bench_alone)
    sent = [int(b) for b in re.findall(r"collectives [0-9.]+ MiB \(([0-9]+) bytes\)", text)]
    layers = layers_of(json.loads(run("moe-plan", "json", plan)))
    width = next(iter(layers.values()))["width"]
    remote = int(remote_rows(counts, layers, 0))
    out, back = remote * (4 * width + 4), remote * 4 * width
    if len(sent) != ranks or sent[0] != out or sum(sent) != out + back:
        fail(f"{label}: the ranks handed {sent} bytes to the exchanges; "
             f"{remote} remote rows of {width} make {out} out of rank 0 and {back} back")
    return remote, out + back


def same_counts_and_tokens(plan, label, launcher, link, counts, bench_alone):
    """moe-run's routing counts are one rank's `counts`, and moe-bench's
    requests spread over the ranks generate one rank's tokens
    (`bench_alone`); moe-run's output."""
    text = run(*launcher, "moe-run", plan, "--prompt-tokens", PROMPT, "--max-new-tokens",
               str(STEPS), "--ignore-eos", "--routing-profile", plan + ".profile.json", *link)
    if profile_counts(plan + ".profile.json") != counts:
        fail(f"{label}: routing counts differ from one rank's")
    run(*launcher, "moe-bench", plan, *BENCH, "--outputs", plan + ".outputs", *link)
    if open(plan + ".outputs").read() != open(bench_alone).read():
        fail(f"{label}: moe-bench outputs differ from one rank's")
    return text


def check_groups(name, checkpoint, work, ranks, launcher, want_run, counts, bench_alone):
    """--ep N --tp N/2 --dp-attention: two data-parallel groups of N/2
    ranks, each attending (tensor-parallel inside the group) for its own
    sequences, each member exchanging its share of the group's rows. The
    logits are bit for bit those of --ep N --tp N/2 (the same sums in the
    same order: the shares add up exactly), the tokens one rank's, the
    routing counts one rank's (each group's first rank counts), and
    moe-bench's requests spread over the groups generate one rank's tokens;
    with two-batch overlap, the same."""
    tp = ranks // 2
    grouped = os.path.join(work, f"{name}-ep{ranks}tp{tp}")
    run("moe-compile", checkpoint, "-o", grouped, "--max-context", "64", "--ep", str(ranks),
        "--tp", str(tp))
    lockstep = logits(grouped, PROMPT, STEPS, launcher)
    for overlap in ([], ["--overlap", "two-batch"]):
        label = f"{name} dp {ranks} tp {tp}" + (" two-batch" if overlap else "")
        plan = f"{grouped}-dp" + ("-overlap" if overlap else "")
        run("moe-compile", checkpoint, "-o", plan, "--max-context", "64", "--ep", str(ranks),
            "--tp", str(tp), "--dp-attention", *overlap)
        got = greedy(plan, PROMPT, STEPS, launcher)
        if got[0] != want_run[0]:
            fail(f"{label}: {got[0]}, one rank {want_run[0]}")
        with open(plan + ".logits", "rb") as f:
            if f.read() != lockstep:
                fail(f"{label}: logits differ from --ep {ranks} --tp {tp}'s")
        same_counts_and_tokens(plan, label, launcher, [], counts, bench_alone)
    print(f"{name} dp {ranks} tp {tp} (with and without two-batch): logits as --ep {ranks} "
          f"--tp {tp}'s, one rank's tokens and routing counts; requests spread over the 2 "
          f"groups generate one rank's tokens")


def check(mpirun, name, checkpoint, work, rank_counts):
    alone = os.path.join(work, name + "-1")
    run("moe-compile", checkpoint, "-o", alone, "--max-context", "64")
    want = logits(alone, PROMPT, STEPS)
    want_run = greedy(alone, PROMPT, STEPS)
    run("moe-run", alone, "--prompt-tokens", PROMPT, "--max-new-tokens", str(STEPS),
        "--ignore-eos", "--routing-profile", alone + ".profile.json")
    counts = profile_counts(alone + ".profile.json")
    bench_alone = alone + ".outputs"
    run("moe-bench", alone, *BENCH, "--outputs", bench_alone)
    for ranks in rank_counts:
        launcher = mpirun + ["-np", str(ranks)]
        plan = os.path.join(work, f"{name}-dp{ranks}")
        for k in (1, 2, 3):
            # k > 1: two-batch overlap, each MoE layer's exchange in k
            # micro-batches, over an emulated link so that the collective
            # stream lags: everything as without.
            split = f"{plan}-overlap{k}" if k > 1 else plan
            overlap = ["--overlap", "two-batch", "--micro-batches", str(k)] if k > 1 else []
            link = ["--emulate-link", "300:1"] if k > 1 else []
            label = f"{name} dp {ranks}" + (f" in {k} micro-batches" if k > 1 else "")
            run("moe-compile", checkpoint, "-o", split, "--max-context", "64", "--ep", str(ranks),
                "--dp-attention", *overlap)
            remote, sent = check_plan(split, label, ranks, launcher, link, want, counts, bench_alone)
            if k == 1:
                print(f"{name} dp {ranks}: logits identical; routing counts as one rank's; "
                      f"{remote} remote rows, {sent} bytes exchanged as the closed form; "
                      f"requests spread over the ranks generate one rank's tokens")
        print(f"{name} dp {ranks} two-batch in 2 and 3 micro-batches: logits, routing counts, "
              f"bytes exchanged and spread requests' tokens as without overlap")
        if ranks >= 4:
            check_groups(name, checkpoint, work, ranks, launcher, want_run, counts, bench_alone)
        # Placed from the single-rank run's profile, with replicas: a row goes
        # to its rank's own replica, else to one its token picks.
        experts = next(i["params"]["num_experts"] for i in
                       json.loads(run("moe-plan", "json", alone))["programs"][0]["instructions"]
                       if i["op"] == "Router")
        extra = (-experts) % ranks or ranks
        placed = plan + "-placed"
        run("moe-compile", checkpoint, "-o", placed, "--max-context", "64", "--ep", str(ranks),
            "--dp-attention", "--placement-profile", alone + ".profile.json", "--redundant",
            str(extra))
        if logits(placed, PROMPT, STEPS, launcher) != want:
            fail(f"{name} dp {ranks} placed: logits differ from one rank's")
        same_counts_and_tokens(placed, f"{name} dp {ranks} placed", launcher, [], counts,
                               bench_alone)
        print(f"{name} dp {ranks} placed with {extra} replicas: logits identical; routing counts "
              f"as one rank's; requests spread over the ranks generate one rank's tokens")


if __name__ == "__main__":
    check_ranked_models(check)
