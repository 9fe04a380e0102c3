#!/usr/bin/env python3
"""Copies a Hugging Face checkpoint (config.json + one model.safetensors) and
edits the copy, with the standard library only, for importer tests.

  edit-checkpoint.py SRC OUT [--set KEY=JSON]... [--copy-tensor NEW=OLD]...
                     [--copy-prefix NEW=OLD]... [--nan-row TENSOR=ROW]...

--set          sets a config.json key to a JSON value
--copy-tensor  adds tensor NEW holding a copy of tensor OLD
--copy-prefix  adds, for every tensor named OLD..., a copy named NEW...
--nan-row      fills row ROW of F32 or BF16 tensor TENSOR with NaN
"""
import argparse
import json
import os
import shutil
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        tensors[name] = (info["dtype"], info["shape"], data[b:e])
    return tensors, meta


def write_safetensors(path, tensors, meta):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, blob = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if meta is not None:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def pair(text):
    new, sep, old = text.partition("=")
    if not sep or not new or not old:
        raise argparse.ArgumentTypeError(f"expected NEW=OLD, got {text!r}")
    return new, old


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--set", action="append", default=[], type=pair)
    ap.add_argument("--copy-tensor", action="append", default=[], type=pair)
    ap.add_argument("--copy-prefix", action="append", default=[], type=pair)
    ap.add_argument("--nan-row", action="append", default=[], type=pair)
    a = ap.parse_args()
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    config = json.load(open(os.path.join(a.src, "config.json")))
    for key, value in a.set:
        config[key] = json.loads(value)
    json.dump(config, open(os.path.join(a.out, "config.json"), "w"), indent=2)
    tensors, meta = read_safetensors(os.path.join(a.src, "model.safetensors"))
    added = {}
    for new, old in a.copy_tensor:
        if old not in tensors:
            sys.exit(f"no tensor {old!r}")
        added[new] = tensors[old]
    for new, old in a.copy_prefix:
        matched = [n for n in tensors if n.startswith(old)]
        if not matched:
            sys.exit(f"no tensor starts with {old!r}")
        for n in matched:
            added[new + n[len(old):]] = tensors[n]
    tensors.update(added)
    nan = {"F32": struct.pack("<f", float("nan")), "BF16": b"\xc0\x7f"}
    for name, row in a.nan_row:
        dtype, shape, blob = tensors[name]
        width = len(nan[dtype]) * shape[-1]
        blob = bytearray(blob)
        blob[int(row) * width:(int(row) + 1) * width] = nan[dtype] * shape[-1]
        tensors[name] = (dtype, shape, bytes(blob))
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
