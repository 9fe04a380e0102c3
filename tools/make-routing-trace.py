#!/usr/bin/env python3
"""Synthetic per-step routing traces shaped like production MoE traffic.

Each layer's experts have a popularity that is skewed as production traffic
was (by default, of 64 experts the hottest 8 carry 35% of the picks and the
coldest 24 carry 8%; the same fractions of E for other expert counts) and
that drifts from day to day: which experts are hot changes, the shape does
not. Every token of a step picks top-k distinct experts with probabilities
proportional to their popularity (drawn one after another without
replacement, as top-k of Gumbel-perturbed log-popularities would). A
placement planned on days 1..7 can then be judged on day 8.

The shape: expert i of E sits at the normal quantile x_i = Phi^-1((i + 0.5)
/ E) and has popularity exp(a x_i) above the median and exp(b x_i) below,
with a and b solved so that the hottest and coldest fractions carry the
given shares of the picks (top-k without replacement flattens the head, so
the shares of the popularity are adjusted until a long simulated run
realises the given ones). The drift: each layer keeps a latent normal
per expert, updated daily as u <- rho u + sqrt(1 - rho^2) n (rho =
--day-correlation); the expert with the largest latent takes the largest
popularity, and so on. The shares the sampled picks realise are printed per
day.

Output, JSON Lines: a header
  {"format": "moe-routing-trace", "version": 1, "num_experts": E,
   "top_k": k, "layers": [layer ids], "days": D, "steps_per_day": S,
   "tokens_per_step": T, "seed": N, "shape": {...}, "day_correlation": rho}
then one line per step
  {"day": d, "step": s, "tokens": T, "counts": [[E picks] per layer]}
with days and steps numbered from 1; each layer's counts sum to T x k.

  make-routing-trace.py -o trace.jsonl [--experts 64] [--top-k 8]
      [--layers 1,2,3,4 | --layers 4] [--days 8] [--steps 50] [--tokens 64]
      [--hot 8:0.35] [--cold 24:0.08] [--day-correlation 0.9] [--seed 0]
"""
import argparse
import bisect
import itertools
import json
import math
import random
import sys
from statistics import NormalDist


def popularity_shape(experts, hot, hot_share, cold, cold_share):
    """Popularities, hottest first, with the hottest `hot` carrying
    hot_share and the coldest `cold` carrying cold_share."""
    q = [NormalDist().inv_cdf((i + 0.5) / experts) for i in range(experts)]

    def weights(a, b):
        w = sorted((math.exp((a if x > 0 else b) * x) for x in q), reverse=True)
        total = sum(w)
        return [x / total for x in w]

    def shares(a, b):
        w = weights(a, b)
        return sum(w[:hot]), sum(w[experts - cold:])

    def solve(f, target, rising):  # bisection on [0, 8]
        lo, hi = 0.0, 8.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if (f(mid) < target) == rising:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    def a_for(b):
        return solve(lambda a: shares(a, b)[0], hot_share, True)

    b = solve(lambda b: shares(a_for(b), b)[1], cold_share, False)
    a = a_for(b)
    got = shares(a, b)
    if abs(got[0] - hot_share) > 1e-3 or abs(got[1] - cold_share) > 1e-3:
        sys.exit(f"make-routing-trace: no skew gives the hottest {hot} {hot_share} and the "
                 f"coldest {cold} {cold_share} of {experts} experts (closest: {got[0]:.3f}, "
                 f"{got[1]:.3f}); choose shares nearer the uniform ones")
    return weights(a, b)


def pick(cumulative, k, rng, picked):
    """k distinct experts drawn one after another without replacement."""
    picked.clear()
    total = cumulative[-1]
    while len(picked) < k:
        picked.add(min(bisect.bisect_right(cumulative, rng.random() * total),
                       len(cumulative) - 1))
    return picked


def calibrated_shape(experts, k, hot, hot_share, cold, cold_share):
    """A shape whose top-k picks give the hottest and coldest experts the
    shares asked for (fixed-point iteration on a simulated run)."""
    want_hot, want_cold = hot_share, cold_share
    for _ in range(12):
        shape = popularity_shape(experts, hot, want_hot, cold, want_cold)
        cumulative = list(itertools.accumulate(shape))
        counts, rng, picked = [0] * experts, random.Random(12345), set()
        for _ in range(20000):
            for e in pick(cumulative, k, rng, picked):
                counts[e] += 1
        total = sum(counts)
        got_hot, got_cold = sum(counts[:hot]) / total, sum(counts[experts - cold:]) / total
        if abs(got_hot - hot_share) < 2e-3 and abs(got_cold - cold_share) < 2e-3:
            break
        want_hot += hot_share - got_hot
        want_cold += cold_share - got_cold
    return shape


def ratio(text, name):
    try:
        count, share = text.split(":")
        return int(count), float(share)
    except ValueError:
        sys.exit(f"make-routing-trace: {name} takes COUNT:SHARE, e.g. 8:0.35, got '{text}'")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True, help="the trace (JSON Lines); - for stdout")
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--layers", default="4",
                    help="MoE layer ids, comma-separated, or a count (ids 0..N-1)")
    ap.add_argument("--days", type=int, default=8)
    ap.add_argument("--steps", type=int, default=50, help="steps per day")
    ap.add_argument("--tokens", type=int, default=64, help="tokens per step")
    ap.add_argument("--hot", default="8:0.35", help="the hottest COUNT experts carry SHARE")
    ap.add_argument("--cold", default="24:0.08", help="the coldest COUNT experts carry SHARE")
    ap.add_argument("--day-correlation", type=float, default=0.9,
                    help="correlation of an expert's latent popularity from one day to the next")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    hot, hot_share = ratio(a.hot, "--hot")
    cold, cold_share = ratio(a.cold, "--cold")
    layers = (list(range(int(a.layers))) if a.layers.isdigit()
              else [int(x) for x in a.layers.split(",")])
    if not (1 <= a.top_k <= a.experts and hot + cold <= a.experts and hot > 0 and cold > 0):
        sys.exit("make-routing-trace: need 1 <= top-k <= experts and hot + cold <= experts")
    if not (0 <= a.day_correlation <= 1):
        sys.exit("make-routing-trace: --day-correlation must lie in [0, 1]")
    if min(a.days, a.steps, a.tokens, len(layers)) < 1:
        sys.exit("make-routing-trace: days, steps, tokens and layers must be positive")
    shape = calibrated_shape(a.experts, a.top_k, hot, hot_share, cold, cold_share)
    rng = random.Random(a.seed)
    latent = [[rng.gauss(0, 1) for _ in range(a.experts)] for _ in layers]
    rho = a.day_correlation
    out = sys.stdout if a.output == "-" else open(a.output, "w")
    header = {"format": "moe-routing-trace", "version": 1, "num_experts": a.experts,
              "top_k": a.top_k, "layers": layers, "days": a.days, "steps_per_day": a.steps,
              "tokens_per_step": a.tokens, "seed": a.seed,
              "shape": {"hot_experts": hot, "hot_share": hot_share, "cold_experts": cold,
                        "cold_share": cold_share},
              "day_correlation": rho}
    out.write(json.dumps(header) + "\n")
    for day in range(1, a.days + 1):
        if day > 1:
            for u in latent:
                for e in range(a.experts):
                    u[e] = rho * u[e] + math.sqrt(1 - rho * rho) * rng.gauss(0, 1)
        cumulative = []
        for u in latent:  # the hottest latent takes the hottest popularity
            p = [0.0] * a.experts
            for place, e in enumerate(sorted(range(a.experts), key=lambda e: -u[e])):
                p[e] = shape[place]
            cumulative.append(list(itertools.accumulate(p)))
        day_counts = [[0] * a.experts for _ in layers]
        picked = set()
        for step in range(1, a.steps + 1):
            counts = [[0] * a.experts for _ in layers]
            for l, cum in enumerate(cumulative):
                for _ in range(a.tokens):
                    for e in pick(cum, a.top_k, rng, picked):
                        counts[l][e] += 1
                        day_counts[l][e] += 1
            out.write(json.dumps({"day": day, "step": step, "tokens": a.tokens,
                                  "counts": counts}) + "\n")
        realised = []
        for c in day_counts:
            s = sorted(c, reverse=True)
            realised.append((sum(s[:hot]) / sum(s), sum(s[a.experts - cold:]) / sum(s)))
        print(f"day {day}: the hottest {hot} carry "
              f"{sum(r[0] for r in realised) / len(realised):.3f} of the picks, the coldest "
              f"{cold} {sum(r[1] for r in realised) / len(realised):.3f} (mean over layers)",
              file=sys.stderr)
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    sys.exit(main())
