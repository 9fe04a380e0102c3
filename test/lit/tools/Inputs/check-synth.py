"""Checks the weights `moe-plan synth` wrote against what Synth.h promises,
reading the plan as JSON (moe-plan json) and the weight file's bytes:
   check-synth.py PLAN.json PLAN-DIR
Matrices of f32/bf16/f16: magnitudes in [2^-8, 2^-4); vectors: 1.0; int8 in
[-127, 127]; fp8 without NaN codes; scales 2^-4 over the type's largest
magnitude. Prints one line per weight type."""
import json
import struct
import sys

plan = json.load(open(sys.argv[1]))
tensors = plan["tensors"]
files = [open(f"{sys.argv[2]}/{w['path']}", "rb").read() for w in plan["weight_files"]]
scale_of = {}
for t in tensors:
    if t["storage"] == "Weight" and t["group"] > 0:
        exact = {"I8": 2**-4 / 127, "I4": 2**-4 / 8, "F8E4M3": 2**-4 / 448}[t["dtype"]]
        scale_of[t["scales"]] = struct.unpack("<f", struct.pack("<f", exact))[0]


def floats(t, raw):
    if t["dtype"] == "F32":
        return struct.unpack(f"<{len(raw) // 4}f", raw)
    if t["dtype"] == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    return list(struct.unpack(f"<{len(raw) // 2}e", raw))


seen = {}
for i, t in enumerate(tensors):
    if t["storage"] != "Weight":
        continue
    raw = files[t["weight_file"]][t["offset"]:t["offset"] + t["size"]]
    kind = "scales" if i in scale_of else "vector" if len(t["shape"]) <= 1 else "matrix"
    key = f"{t['dtype']} {kind}"
    if kind == "scales":
        assert all(v == scale_of[i] for v in floats(t, raw)), t["name"]
    elif t["dtype"] == "I8":
        assert all(-127 <= v <= 127 for v in struct.unpack(f"{len(raw)}b", raw)), t["name"]
    elif t["dtype"] == "F8E4M3":
        assert all(b & 0x7F != 0x7F for b in raw), t["name"]
    elif t["dtype"] in ("F32", "BF16", "F16"):
        values = floats(t, raw)
        if kind == "vector":
            assert all(v == 1.0 for v in values), t["name"]
        else:
            assert all(2**-8 <= abs(v) < 2**-4 for v in values), t["name"]
            assert 0.3 < sum(v > 0 for v in values) / len(values) < 0.7, t["name"] + ": signs"
    seen[key] = seen.get(key, 0) + 1
for key in sorted(seen):
    print(f"{key}: {seen[key]} ok")
