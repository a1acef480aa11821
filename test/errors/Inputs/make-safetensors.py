"""Writes the good and the malformed safetensors files of test/errors.

    make-safetensors.py DIR

for the model of train.test (input x: f32 [2, 3], param w: f32 [3]). Plain
Python (struct + json), no torch, so that every byte of a corrupt file is
spelled out here.
"""

import json
import os
import struct
import sys


def tensor(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def write(path, header, data, length=None):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    size = len(text) if length is None else length
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", size) + text + data)


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def main(out):
    os.makedirs(out, exist_ok=True)
    p = lambda name: os.path.join(out, name)
    w = f32(0.5, -1.0, 2.0)
    x = f32(1, 2, 3, 4, 5, 6)

    # Good files.
    write(p("params.safetensors"), {"w": tensor("F32", [3], 0, 12)}, w)
    write(p("batch.safetensors"), {"x": tensor("F32", [2, 3], 0, 24)}, x)

    # The file itself.
    with open(p("short.safetensors"), "wb") as f:
        f.write(b"\x10\x00\x00")
    with open(p("empty.safetensors"), "wb") as f:
        pass
    write(p("zero-header.safetensors"), b"", w, length=0)
    write(p("long-header.safetensors"), {"w": tensor("F32", [3], 0, 12)}, w,
          length=1 << 40)
    good = json.dumps({"w": tensor("F32", [3], 0, 12)}).encode()
    with open(p("truncated.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(good)) + good + w[:6])

    # The header.
    write(p("not-json.safetensors"), b"{\"w\": [1, 2", w)
    write(p("not-object.safetensors"), [1, 2, 3], w)
    write(p("dup-name.safetensors"),
          b'{"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}, '
          b'"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}', w)
    write(p("bad-dtype.safetensors"), {"w": tensor("F64", [3], 0, 12)}, w)
    write(p("bad-shape.safetensors"), {"w": tensor("F32", [-3], 0, 12)}, w)
    write(p("huge-shape.safetensors"),
          {"w": tensor("F32", [1 << 62, 1 << 62], 0, 12)}, w)
    write(p("reversed.safetensors"), {"w": tensor("F32", [3], 12, 0)}, w)
    write(p("outside.safetensors"), {"w": tensor("F32", [3], 4, 16)}, w)
    write(p("size-mismatch.safetensors"), {"w": tensor("F32", [2], 0, 12)},
          w)
    write(p("overlap.safetensors"),
          {"w": tensor("F32", [3], 0, 12), "v": tensor("F32", [2], 4, 12)}, w)
    write(p("metadata.safetensors"),
          {"__metadata__": {"format": 1}, "w": tensor("F32", [3], 0, 12)}, w)

    # Valid files that do not match the model.
    write(p("missing.safetensors"), {"v": tensor("F32", [3], 0, 12)}, w)
    write(p("wrong-shape.safetensors"), {"w": tensor("F32", [1, 3], 0, 12)},
          w)
    write(p("wrong-dtype.safetensors"), {"w": tensor("F16", [6], 0, 12)}, w)
    write(p("wrong-dtype2.safetensors"), {"w": tensor("I32", [3], 0, 12)}, w)
    write(p("partial-optim.safetensors"),
          {"w": tensor("F32", [3], 0, 12),
           "optimizer.w.exp_avg": tensor("F32", [3], 12, 24)}, w + w)


if __name__ == "__main__":
    main(sys.argv[1])
