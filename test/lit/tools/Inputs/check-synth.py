"""Checks the weights `moe-plan synth` wrote against what Synth.h promises,
reading the plan as JSON (moe-plan json) and the weight file's bytes:
   check-synth.py PLAN.json PLAN-DIR
Matrices of f32/bf16/f16: RMS 1 / sqrt(row length) (the embedding table's
rows: 1), within 10% for those of 1,000 values or more, signs balanced;
vectors: 1.0; int8 in [-127, 127]; fp8 without NaN codes; scales the
matrix's RMS over the RMS of its type's codes (int4 uniform in [-7, 7],
int8 uniform in [-127, 127], fp8 a uniform byte, NaN codes as +-448). Prints one line per weight
type."""
import json
import math
import struct
import sys

plan = json.load(open(sys.argv[1]))
tensors = plan["tensors"]
files = [open(f"{sys.argv[2]}/{w['path']}", "rb").read() for w in plan["weight_files"]]
tables = {i["inputs"][1] for p in plan["programs"] for i in p["instructions"]
          if i["op"] == "Embedding"}


def e4m3(b):
    sign = -1.0 if b & 0x80 else 1.0
    e, m = (b >> 3) & 15, b & 7
    return sign * (m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


fp8 = [e4m3(b ^ 1 if b & 0x7F == 0x7F else b) ** 2 for b in range(256)]  # NaN codes -> +-448
code_rms = {"I4": math.sqrt(sum(q * q for q in range(-7, 8)) / 15),
            "I8": math.sqrt(sum(q * q for q in range(-127, 128)) / 255),
            "F8E4M3": math.sqrt(sum(fp8) / len(fp8))}


def rms_of(i):
    t = tensors[i]
    return 1.0 if i in tables else 1 / math.sqrt(t["shape"][-1])


scale_of = {}
for i, t in enumerate(tensors):
    if t["storage"] == "Weight" and t["group"] > 0:
        scale_of[t["scales"]] = rms_of(i) / code_rms[t["dtype"]]


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
        assert all(abs(v - scale_of[i]) <= 1e-6 * scale_of[i] for v in floats(t, raw)), t["name"]
    elif t["dtype"] == "I8":
        assert all(-127 <= v <= 127 for v in struct.unpack(f"{len(raw)}b", raw)), t["name"]
    elif t["dtype"] == "I4":
        nibbles = [(b >> s & 15) for b in raw for s in (0, 4)]
        assert all(q != 8 for q in nibbles), t["name"] + ": -8, outside [-7, 7]"
    elif t["dtype"] == "F8E4M3":
        assert all(b & 0x7F != 0x7F for b in raw), t["name"]
    elif t["dtype"] in ("F32", "BF16", "F16"):
        values = floats(t, raw)
        if kind == "vector":
            assert all(v == 1.0 for v in values), t["name"]
        else:
            want = rms_of(i)
            assert all(abs(v) < want * math.sqrt(3) * 1.01 for v in values), t["name"]
            if len(values) >= 1000:
                rms = math.sqrt(sum(v * v for v in values) / len(values))
                assert abs(rms / want - 1) < 0.1, f"{t['name']}: RMS {rms}, want {want}"
                assert 0.4 < sum(v > 0 for v in values) / len(values) < 0.6, t["name"] + ": signs"
    seen[key] = seen.get(key, 0) + 1
for key in sorted(seen):
    print(f"{key}: {seen[key]} ok")
