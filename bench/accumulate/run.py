"""Planned memory of the GPT example under gradient accumulation.

Exports the bundled GPT-style model (examples/pytorch/models.py) with a batch
of 8 sequences, compiles it with memopt-compile --micro-batches=K for
K = 1, 2, 4, 8, and prints, from each OUT/memory_report.json, the pools at
the peak program point and the scratch arena, with the activation pool's
ratio to K = 1. Target (issue 8): activations for K = 4 at most 0.3x K = 1;
parameters, gradients and optimizer state unchanged.

    ninja -C build memopt-compile
    PATH=build/bin:$PATH PYTHONPATH=python /usr/bin/python3 bench/accumulate/run.py
"""

import json
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
import memopt  # noqa: E402
import models  # noqa: E402

BATCH = 8


def main():
    work = tempfile.mkdtemp(prefix="memopt-bench-accumulate-")
    torch.manual_seed(0)
    model = models.GPT()
    batch = model.example_batch(torch.Generator().manual_seed(1), batch=BATCH)
    mlir = os.path.join(work, "gpt.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    print(f"GPT example (vocab 128, 2 layers, embed 64, block 16), batch "
          f"{BATCH} sequences; bytes at the peak program point")
    print("| K | micro-batch | activations | vs K=1 | grads | params | "
          "optimizer | arena |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = None
    for k in (1, 2, 4, 8):
        out = os.path.join(work, f"k{k}")
        subprocess.run(["memopt-compile", mlir, "-o", out, "--report=json",
                        f"--micro-batches={k}"], check=True,
                       stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "memory_report.json")) as f:
            report = json.load(f)
        pools = report["pools"]
        act = pools["activations"]
        base = base or act
        print(f"| {k} | {BATCH // k} | {act} | {act / base:.3f}x | "
              f"{pools['grads']} | {pools['params']} | {pools['optimizer']} | "
              f"{report['arena_bytes']} |")
    print("target: activations for K=4 at most 0.3x K=1")


if __name__ == "__main__":
    main()
