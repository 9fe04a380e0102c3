#!/usr/bin/env python3
"""Writes a GPTQ or AWQ 4-bit copy of a checkpoint and its dequantized f32
twin (standard library only).

  quantize-int4.py IN_DIR QUANT_DIR F32_DIR [--method gptq|awq] [--asym]
                   [--group N] [--format gptq|gptq_v2] [--no-g-idx]
                   [--shuffle-g-idx] [--zero Z] [--config KEY=JSON]

Every linear weight of a decoder layer (attention and MLP projections,
experts; not routers, embeddings or the LM head) whose sizes pack (inputs a
multiple of 8 and of the group, outputs a multiple of 8) is quantized the
way GPTQ's quantizer rounds (no calibration: round to nearest) per (group,
output): symmetric, scale = 2 * max|w| / 15 and zero 8; or, with --asym
(GPTQ sym false) and for AWQ, scale = (max - min) / 15 over a range that
holds 0 and zero = round(-min / scale); q = clamp(round(w / scale) + zero,
0, 15); scales stored fp16. It is written as the method stores it:
- GPTQ: X.qweight int32 [in / 8, out] (eight q along `in`, lowest bits
  first), X.qzeros int32 [groups, out / 8] (eight zeros along `out`;
  checkpoint_format gptq stores zero - 1, and its readers take the stored
  nibble + 1, so a zero of 0 reads as 16), X.g_idx int32 [in];
- AWQ ("gemm"): X.qweight int32 [in, out / 8] and X.qzeros [groups, out / 8],
  eight values along `out` in the order 0, 2, 4, 6, 1, 3, 5, 7;
and X.scales fp16 [groups, out]. The twin holds X.weight = fp16(scale) * (q
- zero as read) in F32 instead: the values the layer stands for, exactly.

--zero writes that zero point (0-15) in the first group of the first layer,
--nan-scale makes that group's first scale NaN, --awq-g-idx writes a g_idx
for AWQ layers (which AWQ does not have),
--shuffle-g-idx permutes the first layer's g_idx (act-order), --config sets
quantization_config keys: the cases the importer must refuse.
"""
import argparse
import json
import os
import struct

from safetensors_io import read, write


def values(dtype, raw):
    if dtype == "F32":
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    if dtype == "F16":
        return list(struct.unpack(f"<{len(raw) // 2}e", raw))
    words = struct.unpack(f"<{len(raw) // 2}H", raw)  # BF16: the top half of an f32
    return [struct.unpack("<f", struct.pack("<I", w << 16))[0] for w in words]


def quantizable(name, shape, group):
    parts = name.split(".")
    if len(shape) != 2 or not name.startswith("model.layers.") or parts[-1] != "weight":
        return False
    if parts[-2] in ("gate", "shared_expert_gate"):  # routers stay float
        return False
    out, inputs = shape
    return out % 8 == 0 and inputs % 8 == 0 and (group == -1 or inputs % group == 0)


def quantize(w, out, inputs, group, asym):
    """q [out][in] in 0..15, fp16-rounded scales and zeros [groups][out]."""
    g = inputs if group == -1 else group
    groups = inputs // g
    q = [[0] * inputs for _ in range(out)]
    scales = [[0.0] * out for _ in range(groups)]
    zeros = [[8] * out for _ in range(groups)]
    for o in range(out):
        row = w[o * inputs:(o + 1) * inputs]
        for k in range(groups):
            part = row[k * g:(k + 1) * g]
            xmax = max(max(part), 0.0)
            xmin = min(min(part), 0.0)
            if not asym:
                xmax = max(-xmin, xmax)
                xmin = -xmax
            if xmax == xmin:
                xmin, xmax = -1.0, 1.0
            scale = (xmax - xmin) / 15
            zero = round(-xmin / scale) if asym else 8
            for i, v in enumerate(part):
                q[o][k * g + i] = min(max(round(v / scale) + zero, 0), 15)
            scales[k][o] = struct.unpack("<e", struct.pack("<e", scale))[0]
            zeros[k][o] = zero
    return q, scales, zeros, g


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble t of a word holds output 8k + AWQ_ORDER[t]


def pack_outputs(rows, awq):
    """Rows of per-output values -> words of eight outputs each."""
    order = AWQ_ORDER if awq else list(range(8))
    return [sum((row[8 * k + order[t]] & 15) << (4 * t) for t in range(8))
            for row in rows for k in range(len(row) // 8)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("quant")
    ap.add_argument("f32")
    ap.add_argument("--method", choices=["gptq", "awq"], default="gptq")
    ap.add_argument("--asym", action="store_true", help="GPTQ with sym false")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--format", choices=["gptq", "gptq_v2"], default="gptq")
    ap.add_argument("--no-g-idx", action="store_true")
    ap.add_argument("--shuffle-g-idx", action="store_true")
    ap.add_argument("--zero", type=int, default=8)
    ap.add_argument("--nan-scale", action="store_true", help="the first layer's first scale NaN")
    ap.add_argument("--awq-g-idx", action="store_true", help="a g_idx for AWQ layers too")
    ap.add_argument("--config", action="append", default=[], metavar="KEY=JSON")
    args = ap.parse_args()

    config = json.load(open(os.path.join(args.src, "config.json")))
    tensors = read(os.path.join(args.src, "model.safetensors"))
    awq = args.method == "awq"
    v1 = not awq and args.format == "gptq"
    quant, twin, first = {}, {}, True
    for name, (dtype, shape, raw) in tensors.items():
        if not quantizable(name, shape, args.group):
            quant[name] = twin[name] = (dtype, shape, raw)
            continue
        out, inputs = shape
        q, scales, zeros, g = quantize(values(dtype, raw), out, inputs, args.group, awq or args.asym)
        groups = len(scales)
        if first and args.zero != 8:
            zeros[0][0] = args.zero
        if first and args.nan_scale:
            scales[0][0] = float("nan")
        stored = [[(z - 1) & 15 if v1 else z for z in row] for row in zeros]
        read_zero = [[z + 1 if v1 else z for z in row] for row in stored]
        stem = name[:-len(".weight")]
        if awq:
            qweight = pack_outputs([[q[o][i] for o in range(out)] for i in range(inputs)], True)
            quant[stem + ".qweight"] = ("I32", [inputs, out // 8], struct.pack(f"<{len(qweight)}I", *qweight))
        else:
            qweight = [sum(q[o][8 * j + t] << (4 * t) for t in range(8))
                       for j in range(inputs // 8) for o in range(out)]
            quant[stem + ".qweight"] = ("I32", [inputs // 8, out], struct.pack(f"<{len(qweight)}I", *qweight))
        zero_words = pack_outputs(stored, awq)
        quant[stem + ".scales"] = ("F16", [groups, out],
                                   struct.pack(f"<{groups * out}e", *[s for row in scales for s in row]))
        quant[stem + ".qzeros"] = ("I32", [groups, out // 8], struct.pack(f"<{len(zero_words)}I", *zero_words))
        g_idx = [i // g for i in range(inputs)]
        if first and args.shuffle_g_idx and groups > 1:
            g_idx[0], g_idx[-1] = g_idx[-1], g_idx[0]
        if (not awq and not args.no_g_idx) or (awq and args.awq_g_idx):
            quant[stem + ".g_idx"] = ("I32", [inputs], struct.pack(f"<{inputs}i", *g_idx))
        first = False
        deq = [scales[i // g][o] * (q[o][i] - read_zero[i // g][o]) for o in range(out) for i in range(inputs)]
        twin[name] = ("F32", shape, struct.pack(f"<{len(deq)}f", *deq))

    if awq:
        config_quant = {"quant_method": "awq", "zero_point": True, "group_size": args.group, "bits": 4,
                        "version": "gemm", "modules_to_not_convert": None}
    else:
        config_quant = {"quant_method": "gptq", "bits": 4, "group_size": args.group, "desc_act": False,
                        "sym": not args.asym, "damp_percent": 0.01, "true_sequential": True,
                        "static_groups": False, "checkpoint_format": args.format,
                        "model_name_or_path": None, "model_file_base_name": "model"}
    for item in args.config:
        key, value = item.split("=", 1)
        config_quant[key] = json.loads(value)
    for path, data, extra in ((args.quant, quant, {"quantization_config": config_quant}),
                              (args.f32, twin, {})):
        os.makedirs(path, exist_ok=True)
        for other in os.listdir(args.src):
            if other not in ("config.json", "model.safetensors"):
                with open(os.path.join(args.src, other), "rb") as f, open(os.path.join(path, other), "wb") as g:
                    g.write(f.read())
        json.dump({**config, **extra}, open(os.path.join(path, "config.json"), "w"), indent=2)
        write(os.path.join(path, "model.safetensors"), data)


if __name__ == "__main__":
    main()
