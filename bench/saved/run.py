"""Activation bytes saved for the backward: memopt against PyTorch eager.

    /usr/bin/python3 bench/saved/run.py [--build BUILD] [MODEL ...]

MODEL: mlp, gpt, cnn, llama (the bundled models and batches) or gpt2-small
(GPT-2 small's shape: 12 layers, width 768, 12 heads, vocabulary 50257,
sequence 1024, batch 1). For each it prints

  - PyTorch 1.13 eager FP32: the tensors autograd saves for the backward
    (torch.autograd.graph.saved_tensors_hooks), each storage counted once,
    parameters and the batch excluded (they are model state and data in
    memopt's account too), measured in this run;
  - memopt FP32 and --mixed-precision=bf16: the sum of `by_scope` of
    memory_report.json (scratch bytes a forward kernel writes that are live
    at the first backward op), with their ratios to PyTorch's and BF16's to
    FP32's.

memopt-compile is taken from BUILD/bin (default build/); the models are
exported to a temporary directory (GPT-2 small from the meta device).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))

import torch  # noqa: E402

import memopt  # noqa: E402
import models  # noqa: E402

GIB = 2.0 ** 30


def build(name, meta=False):
    """(model, batch) of `name`; with `meta`, GPT-2 small's parameters are
    on the meta device (for export: no data)."""
    if name == "gpt2-small":
        torch.manual_seed(0)
        device = "meta" if meta else "cpu"
        model = models.gpt2_small(device=device)
        idx = torch.randint(0, 50257, (1, 1024), device=device)
        return model, {"idx": idx, "targets": idx.clone()}
    return models.build(name)


def pytorch_saved_bytes(model, batch):
    """Bytes of the distinct storages autograd saves for the backward in
    one forward, without parameters, buffers and the batch."""
    excluded = {t.storage().data_ptr()
                for t in list(model.parameters()) + list(model.buffers()) +
                list(batch.values())}
    storages = {}

    def pack(tensor):
        storage = tensor.storage()
        if storage.data_ptr() not in excluded:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(**batch)
    del loss
    return sum(storages.values())


def memopt_saved_bytes(mlir, out, *flags):
    subprocess.run(["memopt-compile", mlir, "-o", out, "--report-only",
                    "--report=json", *flags], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "memory_report.json")) as f:
        return sum(json.load(f)["by_scope"].values())


def fmt(n):
    return f"{n / GIB:.3f} GiB" if n >= GIB / 4 else f"{n / 2**20:.3f} MiB"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--flags", default="",
                        help="extra memopt-compile flags, space-separated")
    parser.add_argument("models", nargs="*",
                        default=["mlp", "gpt", "cnn", "gpt2-small"])
    args = parser.parse_args()
    os.environ["PATH"] = (os.path.join(args.build, "bin") + os.pathsep +
                          os.environ["PATH"])
    extra = args.flags.split()
    print(f"{'model':12} {'PyTorch FP32':>14} {'memopt FP32':>14} "
          f"{'ratio':>6} {'memopt BF16':>14} {'/FP32':>6}")
    with tempfile.TemporaryDirectory() as work:
        for name in args.models:
            model, batch = build(name)
            torch_bytes = pytorch_saved_bytes(model, batch)
            del model, batch
            meta_model, meta_batch = build(name, meta=True)
            mlir = os.path.join(work, f"{name}.mlir")
            memopt.export(meta_model, tuple(meta_batch.values()), mlir)
            fp32 = memopt_saved_bytes(mlir, os.path.join(work, name + "-32"),
                                      *extra)
            bf16 = memopt_saved_bytes(mlir, os.path.join(work, name + "-16"),
                                      "--mixed-precision=bf16", *extra)
            print(f"{name:12} {fmt(torch_bytes):>14} {fmt(fp32):>14} "
                  f"{fp32 / torch_bytes:6.3f} {fmt(bf16):>14} "
                  f"{bf16 / fp32:6.3f}", flush=True)


if __name__ == "__main__":
    main()
