"""Exports a bundled PyTorch model and an example batch for memopt.

    /usr/bin/python3 examples/pytorch/export.py {mlp,gpt,cnn} OUTDIR

writes OUTDIR/model.mlir, OUTDIR/model.safetensors (initial parameters) and
OUTDIR/batch.safetensors (one batch, named after forward()'s arguments).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import memopt  # noqa: E402
import models  # noqa: E402


def main(argv):
    if len(argv) != 3 or argv[1] not in models.MODELS:
        print(f"usage: {argv[0]} {{{','.join(models.MODELS)}}} OUTDIR",
              file=sys.stderr)
        return 1
    name, outdir = argv[1], argv[2]
    os.makedirs(outdir, exist_ok=True)
    model, batch = models.build(name)
    memopt.export(model, tuple(batch.values()),
                  os.path.join(outdir, "model.mlir"))
    memopt.safetensors.save(batch, os.path.join(outdir, "batch.safetensors"))
    params = sum(p.numel() for p in model.parameters())
    print(f"exported {name} ({params} parameters) to {outdir}/model.mlir")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
