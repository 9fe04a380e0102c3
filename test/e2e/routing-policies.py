#!/usr/bin/env python3
"""Checks the routing-policies.test runs (standard library only).

  routing-policies.py WORK

Reads WORK's evaluations (moe-run --json) and routing profiles and prints
one line per claim; exits 1 on the first that does not hold.
"""
import json
import os
import sys

from plan_checks import fail


def imbalance(profile):
    layers = json.load(open(profile))["layers"]
    return max(max(l["counts"]) / (sum(l["counts"]) / len(l["counts"])) for l in layers)


def main():
    work = sys.argv[1]
    ev = lambda name: json.load(open(os.path.join(work, name + "-eval.json")))
    token = imbalance(os.path.join(work, "token.json"))
    if token < 1.5:
        fail(f"token choice's load is already even ({token:.3f}): the test shows nothing")
    print(f"token choice: expert load max/mean {token:.3f} (uneven)")
    cap = imbalance(os.path.join(work, "cap1.json"))
    e = ev("cap1")
    # Each step: at most ceil(256 x 2 / 8) = 64 picks per expert, of 64 on
    # average; the last, shorter window and overflow picks add a little.
    if cap > 1.05 or not e["kl"] > 0:
        fail(f"capacity 1: load max/mean {cap:.3f}, KL {e['kl']}")
    print(f"capacity 1: expert load max/mean {cap:.3f} (even), KL {e['kl']:.4f} > 0, "
          f"top-1 agreement {100 * e['top1']:.2f}%")
    base = ev("token")["bits_per_byte"]
    for name, label in (("cap64", "capacity 64"), ("ec64", "expert choice 64")):
        e = ev(name)
        if e["bits_per_byte"] != base or e["kl"] != 0 or e["top1"] != 1:
            fail(f"{label}: {e['bits_per_byte']} bits per byte (token choice {base}), "
                 f"KL {e['kl']}, top-1 {e['top1']}")
        print(f"{label}: the bits of token choice")


if __name__ == "__main__":
    main()
