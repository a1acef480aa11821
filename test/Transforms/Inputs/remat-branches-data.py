"""Writes params.safetensors and batch.safetensors for remat-branches.mlir
into DIR (plain Python: struct + json, a fixed linear congruential stream).

    remat-branches-data.py DIR
"""

import json
import os
import struct
import sys

state = 12345


def uniform():
    global state
    state = (state * 1103515245 + 12345) % (1 << 31)
    return state / float(1 << 31) * 2 - 1


def write(path, tensors):
    header, data = {}, b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def f32(count, scale):
    return struct.pack("<%df" % count, *[uniform() * scale for _ in range(count)])


def main(out):
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "params.safetensors"), {
        "net.a.weight": ("F32", [16, 16], f32(256, 0.25)),
        "net.b.weight": ("F32", [16, 16], f32(256, 0.25)),
    })
    labels = [int((uniform() + 1) * 8) % 16 for _ in range(256)]
    write(os.path.join(out, "batch.safetensors"), {
        "x": ("F32", [256, 16], f32(256 * 16, 1.0)),
        "y": ("I64", [256], struct.pack("<256q", *labels)),
    })


if __name__ == "__main__":
    main(sys.argv[1])
