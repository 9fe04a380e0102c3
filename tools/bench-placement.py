#!/usr/bin/env python3
"""Expert placement quality on a production-shaped routing trace.

64 experts (top-8) of 4 MoE layers on 8 ranks (2 nodes of 4), traffic from
tools/make-routing-trace.py (the hottest 8 experts carry 35% of the picks,
the coldest 24 8%, drifting from day to day). A routing profile of days
1-7 (the sum of their counts, as `moe-run --routing-profile` accumulates
them) plans each placement; each is then replayed on days 1-7 and on day 8
(planned from the past, judged on the next day). Reported: the most loaded
rank over the mean rank load, over the whole window and per step (the
slowest rank sets a step's time), as the mean over layers.

Placements: round-robin; moe-place without replicas (greedy packing); with
8 and 16 redundant slots, and with 16 from a profile that decays the past
by 0.5 a day (`--profile-decay 0.5` after each day's run); and DeepSeek's EPLB (github.com/deepseek-ai/EPLB,
`rebalance_experts`) reimplemented below from its published algorithm,
hierarchical (8 expert groups packed onto the 2 nodes, replicas within each
node, then physical experts packed onto GPUs) and global, with the same
redundant slots. Every placement is replayed by the same function here;
moe-place's own replay of its placements must agree with it.

  bench-placement.py BUILD_BIN [--tokens 256] [--steps 50] [--seed 0]
                     [--day-correlation 0.9]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_common import cpu_model

HERE = os.path.dirname(os.path.abspath(__file__))
EXPERTS, TOP_K, LAYERS, RANKS, PER_NODE, DAYS = 64, 8, 4, 8, 4, 8


# --- DeepSeek's EPLB, reimplemented from its published algorithm (one layer).
def eplb_balanced_packing(weights, packs):
    """Items (heaviest first) each to the lightest pack that still has room
    for len(weights) / packs items; returns each item's (pack, rank in pack)."""
    per_pack = len(weights) // packs
    load, count = [0.0] * packs, [0] * packs
    where = [None] * len(weights)
    for item in sorted(range(len(weights)), key=lambda i: -weights[i]):
        pack = min((p for p in range(packs) if count[p] < per_pack), key=lambda p: load[p])
        where[item] = (pack, count[pack])
        load[pack] += weights[item]
        count[pack] += 1
    return where


def eplb_replicate(weights, physical):
    """Each extra slot to the expert with the highest load per replica;
    returns (logical expert of each physical slot, replica counts)."""
    count = [1] * len(weights)
    phy2log = list(range(len(weights)))
    for _ in range(physical - len(weights)):
        best = max(range(len(weights)), key=lambda e: weights[e] / count[e])
        phy2log.append(best)
        count[best] += 1
    return phy2log, count


def eplb(weights, physical, groups, nodes, gpus):
    """Per logical expert, the GPUs of its replicas."""
    if groups % nodes != 0:  # the global policy
        groups, nodes = 1, 1
    experts = len(weights)
    group_size = experts // groups
    # 1. groups onto nodes
    group_load = [sum(weights[g * group_size:(g + 1) * group_size]) for g in range(groups)]
    node_of_group = [p for p, _ in eplb_balanced_packing(group_load, nodes)]
    placement = [[] for _ in range(experts)]
    gpus_per_node = gpus // nodes
    for node in range(nodes):
        local = [e for e in range(experts) if node_of_group[e // group_size] == node]
        # 2. replicas within the node
        phy2log, count = eplb_replicate([weights[e] for e in local], physical // nodes)
        # 3. physical experts onto the node's GPUs
        phy_load = [weights[local[m]] / count[m] for m in phy2log]
        for phy, (gpu, _) in enumerate(eplb_balanced_packing(phy_load, gpus_per_node)):
            placement[local[phy2log[phy]]].append(node * gpus_per_node + gpu)
    return placement


# --- Replay: per step, each rank's load is the sum over its slots of the
# expert's count / the expert's replicas.
def rank_loads(placement, counts):
    loads = [0.0] * RANKS
    for e, ranks in enumerate(placement):
        for r in ranks:
            loads[r] += counts[e] / len(ranks)
    return loads


def imbalance(loads):
    mean = sum(loads) / len(loads)
    return max(loads) / mean if mean > 0 else 1.0


def replay(placements, steps, days):
    """Mean over layers of (window max/mean, mean per-step max/mean)."""
    window = step = 0.0
    for layer, placement in enumerate(placements):
        chosen = [s["counts"][layer] for s in steps if s["day"] in days]
        per_step = [rank_loads(placement, c) for c in chosen]
        total = [sum(col) for col in zip(*per_step)]
        window += imbalance(total)
        step += sum(imbalance(l) for l in per_step) / len(per_step)
    return window / LAYERS, step / LAYERS


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bin")
    ap.add_argument("--tokens", type=int, default=256, help="tokens per step")
    ap.add_argument("--steps", type=int, default=50, help="steps per day")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--day-correlation", type=float, default=0.9,
                    help="how much of an expert's popularity carries over to the next day")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        trace = f"{work}/trace.jsonl"
        subprocess.run([sys.executable, f"{HERE}/make-routing-trace.py", "-o", trace,
                        "--experts", str(EXPERTS), "--top-k", str(TOP_K), "--layers",
                        str(LAYERS), "--days", str(DAYS), "--steps", str(a.steps), "--tokens",
                        str(a.tokens), "--seed", str(a.seed), "--day-correlation",
                        str(a.day_correlation)], check=True,
                       stderr=subprocess.DEVNULL)
        lines = [json.loads(l) for l in open(trace)]
        steps = lines[1:]
        past, next_day = set(range(1, DAYS)), {DAYS}
        # Profiles of days 1-7, as the runtime accumulates one a day.
        def write_profile(path, decay):
            counts, tokens = [[0.0] * EXPERTS for _ in range(LAYERS)], 0.0
            for day in sorted(past):
                counts = [[decay * c for c in layer] for layer in counts]
                tokens *= decay
                for s in steps:
                    if s["day"] == day:
                        tokens += s["tokens"]
                        for l in range(LAYERS):
                            for e in range(EXPERTS):
                                counts[l][e] += s["counts"][l][e]
            with open(path, "w") as f:
                json.dump({"format": "moe-routing-profile", "version": 1, "model_type": "trace",
                           "num_experts": EXPERTS, "top_k": TOP_K, "windows": len(past),
                           "decay": decay, "tokens": tokens,
                           "last_window": {"tokens": a.steps * a.tokens, "ranks": RANKS,
                                           "ended": f"day {DAYS - 1}"},
                           "layers": [{"layer": l, "counts": counts[l]} for l in range(LAYERS)]},
                          f)
            return counts
        profile, decayed = f"{work}/profile.json", f"{work}/decayed.json"
        counts = write_profile(profile, 1.0)
        write_profile(decayed, 0.5)
        cpu = cpu_model()
        print(f"{EXPERTS} experts top-{TOP_K}, {LAYERS} layers, {RANKS} ranks in "
              f"{RANKS // PER_NODE} nodes; {a.steps} steps of {a.tokens} tokens a day, "
              f"profile of days 1-{DAYS - 1}, replayed on days 1-{DAYS - 1} and day {DAYS} "
              f"(day correlation {a.day_correlation}, seed {a.seed}; {cpu})")
        print(f"{'placement':38} {'predicted':>9} {'days 1-7':>9} {'per step':>9} "
              f"{'day 8':>9} {'per step':>9}")

        def row(name, placements, predicted):
            w, s = replay(placements, steps, past)
            w8, s8 = replay(placements, steps, next_day)
            print(f"{name:38} {predicted:9.3f} {w:9.3f} {s:9.3f} {w8:9.3f} {s8:9.3f}",
                  flush=True)
            return w, w8

        results = {}
        for name, source, flags in (
                ("round-robin", profile, ["--strategy", "round-robin"]),
                ("moe-place, no replicas (greedy)", profile, []),
                ("moe-place, 8 redundant", profile, ["--redundant", "8"]),
                ("moe-place, 16 redundant", profile, ["--redundant", "16"]),
                ("moe-place, 16 red., decay 0.5/day", decayed, ["--redundant", "16"])):
            out = subprocess.run([f"{a.bin}/moe-place", "--profile", source, "--ranks",
                                  str(RANKS), "--ranks-per-node", str(PER_NODE), "--trace", trace,
                                  "--days", f"1:{DAYS - 1}", "--json", "-"] + flags,
                                 capture_output=True, text=True, check=True).stdout
            doc = json.loads(out)
            placements = [[[slot[0] for slot in e] for e in layer["experts"]]
                          for layer in doc["layers"]]
            # moe-place's replay and this one agree.
            w, s = replay(placements, steps, past)
            assert abs(w - doc["summary"]["trace_max_over_mean"]) < 1e-9, (w, doc["summary"])
            assert abs(s - doc["summary"]["trace_step_max_over_mean"]) < 1e-9, (s, doc)
            results[name] = row(name, placements,
                                doc["summary"]["predicted_max_over_mean"])
        for redundant in (8, 16):
            for groups, kind in ((8, "hierarchical, 8 groups"), (1, "global")):
                placements = [eplb(counts[l], EXPERTS + redundant, groups,
                                   RANKS // PER_NODE, RANKS) for l in range(LAYERS)]
                predicted = sum(imbalance(rank_loads(p, counts[l]))
                                for l, p in enumerate(placements)) / LAYERS
                results[f"eplb {redundant} {kind}"] = row(
                    f"EPLB {kind}, {redundant} red.", placements, predicted)
        w16 = results["moe-place, 16 redundant"][0]
        print(f"moe-place with 16 redundant slots, days 1-7: max/mean {w16:.3f} "
              f"({'within' if w16 <= 1.05 else 'ABOVE'} the 1.05 bound)")


if __name__ == "__main__":
    sys.exit(main())
