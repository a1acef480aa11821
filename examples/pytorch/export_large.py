"""Exports the large bundled configurations from the meta device.

    /usr/bin/python3 examples/pytorch/export_large.py {gpt2-small,llama-7b} OUT.mlir

builds the model with its parameters on PyTorch's meta device (shapes, no
data), traces it on a meta batch and writes OUT.mlir; no parameter file.
examples/gpt2-small.mlir and examples/llama-7b.mlir are its output
(test/Examples/large-examples.test checks that they are up to date).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402

import memopt  # noqa: E402
import models  # noqa: E402


def main(argv):
    if len(argv) != 3 or argv[1] not in models.LARGE_MODELS:
        print(f"usage: {argv[0]} {{{','.join(models.LARGE_MODELS)}}} "
              "OUT.mlir", file=sys.stderr)
        return 1
    name, path = argv[1], argv[2]
    build, (batch, seq) = models.LARGE_MODELS[name]
    model = build(device="meta")
    idx = torch.empty(batch, seq, dtype=torch.int64, device="meta")
    targets = torch.empty(batch, seq, dtype=torch.int64, device="meta")
    memopt.export(model, (idx, targets), path)
    params = sum(p.numel() for p in model.parameters())
    print(f"exported {name} ({params} parameters, batch {batch} x {seq}) "
          f"to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
