#!/usr/bin/env python3
"""Writes the f32 twin of an fp8 block-scaled checkpoint (standard library only).

  dequantize-fp8.py IN_DIR OUT_DIR

Every F8_E4M3 tensor W with its `W_scale_inv` block scales becomes the F32
tensor W[r, c] = e4m3(W[r, c]) * scale_inv[r // br, c // bc] (block sizes
from quantization_config.weight_block_size); the scale tensors and the
quantization_config are dropped. The reference for moe-compile's fp8 path.
"""
import json
import os
import struct
import sys

from safetensors_io import read, write


def e4m3(b):
    sign = -1.0 if b & 0x80 else 1.0
    e, m = (b >> 3) & 15, b & 7
    return sign * (m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


src, dst = sys.argv[1], sys.argv[2]
config = json.load(open(os.path.join(src, "config.json")))
br, bc = config.pop("quantization_config")["weight_block_size"]
tensors = read(os.path.join(src, "model.safetensors"))
table = [e4m3(b) for b in range(256)]
out = {}
for name, (dtype, shape, raw) in tensors.items():
    if name.endswith("_scale_inv"):
        continue
    if dtype == "F8_E4M3":
        s_dtype, s_shape, s_raw = tensors[name + "_scale_inv"]
        scales = struct.unpack(f"<{len(s_raw) // 4}f", s_raw)
        rows, cols = shape[0], shape[-1]
        values = [table[raw[r * cols + c]] * scales[(r // br) * s_shape[-1] + c // bc]
                  for r in range(rows) for c in range(cols)]
        raw = struct.pack(f"<{len(values)}f", *values)
        dtype = "F32"
    out[name] = (dtype, shape, raw)
os.makedirs(dst, exist_ok=True)
json.dump(config, open(os.path.join(dst, "config.json"), "w"), indent=2)
write(os.path.join(dst, "model.safetensors"), out)
