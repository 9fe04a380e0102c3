"""Reads and writes whole safetensors files (standard library only): the
test scripts that rewrite checkpoints share these."""
import json
import struct


def read(path):
    """{name: (dtype, shape, raw bytes)} in the file's order."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


def write(path, tensors):
    """Writes {name: (dtype, shape, raw bytes)}, in that order."""
    header, offset = {}, 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, raw in tensors.values():
            f.write(raw)
