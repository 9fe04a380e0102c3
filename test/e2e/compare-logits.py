#!/usr/bin/env python3
"""Compares two moe-run --dump-logits files row by row (standard library only).

  compare-logits.py A.bin B.bin [--tolerance 1e-5]
"""
import argparse
import struct
import sys

ap = argparse.ArgumentParser()
ap.add_argument("a")
ap.add_argument("b")
ap.add_argument("--tolerance", type=float, default=1e-5)
args = ap.parse_args()
a, b = open(args.a, "rb").read(), open(args.b, "rb").read()
if len(a) != len(b) or len(a) % 4:
    sys.exit(f"logit dumps differ in size: {len(a)} vs {len(b)} bytes")
n = len(a) // 4
err = max((abs(x - y) for x, y in zip(struct.unpack(f"<{n}f", a),
                                      struct.unpack(f"<{n}f", b))), default=0.0)
print(f"{n} logits, max abs difference {err:.3g} (tolerance {args.tolerance:g})")
sys.exit(0 if err <= args.tolerance else 1)
