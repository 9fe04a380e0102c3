#!/usr/bin/env python3
"""Checks routing profiles (moe/runtime/RoutingProfile.h) against each other.

  check-profile.py shape PROFILE MODEL_TYPE EXPERTS TOP_K LAYERS RANKS WINDOWS
      the header fields, and per layer counts summing to top_k x tokens
  check-profile.py merged MERGED OLD WINDOW DECAY
      MERGED = DECAY x OLD + WINDOW, count for count (and tokens)
  check-profile.py scaled PROFILE BASE FACTOR
      PROFILE's counts are FACTOR x BASE's, exactly
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def counts(p):
    return [c for layer in p["layers"] for c in layer["counts"]]


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "shape":
        p = load(args[0])
        want = {"format": "moe-routing-profile", "version": 1, "model_type": args[1],
                "num_experts": int(args[2]), "top_k": int(args[3])}
        got = {k: p[k] for k in want}
        assert got == want, got
        assert [l["layer"] for l in p["layers"]] == [int(x) for x in args[4].split(",")], p
        assert p["last_window"]["ranks"] == int(args[5]) and p["windows"] == int(args[6]), p
        tokens = p["last_window"]["tokens"]
        for layer in p["layers"]:
            assert len(layer["counts"]) == p["num_experts"], layer
            if p["windows"] == 1:
                assert sum(layer["counts"]) == p["top_k"] * tokens, (layer, tokens)
        print(f"profile of {tokens} tokens on {args[5]} rank(s), {p['windows']} window(s): ok")
    elif mode == "merged":
        merged, old, window, decay = load(args[0]), load(args[1]), load(args[2]), float(args[3])
        assert merged["windows"] == old["windows"] + 1 and merged["decay"] == decay, merged
        for m, o, w in zip(counts(merged), counts(old), counts(window)):
            assert abs(m - (decay * o + w)) <= 1e-9 * max(1.0, m), (m, o, w)
        assert abs(merged["tokens"] - (decay * old["tokens"] + window["tokens"])) < 1e-9
        print("merged with decay", decay, "ok")
    elif mode == "scaled":
        p, base, factor = load(args[0]), load(args[1]), float(args[2])
        assert counts(p) == [factor * c for c in counts(base)], (counts(p), counts(base))
        print(f"{factor:g} x the base counts: ok")
    else:
        sys.exit(f"check-profile.py: unknown mode {mode}")


if __name__ == "__main__":
    main()
