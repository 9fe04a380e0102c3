#!/usr/bin/env python3
"""Checks `moe-run --eval-file --json` against the bits per byte that the
training framework recorded in the model's eval.json (standard library only).

  check-bpb.py EVAL_JSON RUN_JSON [--relative 1e-3]
"""
import argparse
import json
import sys

ap = argparse.ArgumentParser()
ap.add_argument("recorded")
ap.add_argument("run")
ap.add_argument("--relative", type=float, default=1e-3)
a = ap.parse_args()
want = json.load(open(a.recorded))
got = json.load(open(a.run))
if got["bytes"] != want["heldout_bytes"]:
    sys.exit(f"evaluated {got['bytes']} bytes, the record has {want['heldout_bytes']}")
rel = abs(got["bits_per_byte"] - want["heldout_bits_per_byte"]) / want["heldout_bits_per_byte"]
print(f"held-out bits per byte: ours {got['bits_per_byte']:.6f}, "
      f"transformers {want['heldout_bits_per_byte']:.6f}, relative difference "
      f"{rel:.2e} (bound {a.relative:g})")
sys.exit(0 if rel <= a.relative else 1)
