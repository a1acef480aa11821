# The host runtime splits its loops over threads (runtime/host/Parallel.h)
# without splitting any sum, so a training step's results do not depend on
# the number of threads: a GPT (dropout, fused attention and LM-head loss,
# 256 tokens of width 128), the bundled CNN at batch 16 (im2col of 16
# images per GEMM, batch norm, pooling) and an MLP at batch 512, in FP32 and
# the CNN also in BF16, each train 3 AdamW steps with MEMOPT_NUM_THREADS 1,
# 2 and 3 from the same parameters; the printed losses and the saved
# parameters and optimizer state must be the same bytes. OpenBLAS runs one
# thread, so that only memopt's threads vary. Every model has loops long
# enough to be split (more than 2 x 8192 elements).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: gpt fp32: 3 steps, 1 2 3 threads: identical losses and state
# CHECK: cnn fp32: 3 steps, 1 2 3 threads: identical losses and state
# CHECK: cnn bf16: 3 steps, 1 2 3 threads: identical losses and state
# CHECK: mlp fp32: 3 steps, 1 2 3 threads: identical losses and state

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import ADAMW_FLAGS, compile_model  # noqa: E402

STEPS = 3
THREADS = (1, 2, 3)


def build(name):
    import torch
    import models
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    if name == "gpt":
        model = models.GPT(vocab=256, block=64, embed=128, heads=4, layers=2,
                           dropout=0.1)
        return model, model.example_batch(generator)
    if name == "cnn":
        model = models.CNN()
        return model, {"x": torch.randn(16, 3, 16, 16, generator=generator),
                       "y": torch.randint(0, 10, (16,), generator=generator)}
    model = models.MLP()
    return model, {"x": torch.randn(512, 64, generator=generator),
                   "y": torch.randint(0, 10, (512,), generator=generator)}


def main():
    workdir, src = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import memopt
    ok = True
    for name, precision in (("gpt", "fp32"), ("cnn", "fp32"), ("cnn", "bf16"),
                            ("mlp", "fp32")):
        label = f"{name} {precision}"
        model, batch = build(name)
        work = os.path.join(workdir, f"{name}-{precision}")
        os.makedirs(work)
        mlir = os.path.join(work, "model.mlir")
        memopt.export(model, tuple(batch.values()), mlir)
        memopt.safetensors.save(batch, os.path.join(work, "batch.safetensors"))
        out = os.path.join(work, "out")
        flags = list(ADAMW_FLAGS)
        if precision == "bf16":
            flags.append("--mixed-precision=bf16")
        if name == "gpt":
            flags.append("--lm-loss-chunk=96")
        compile_model(mlir, out, *flags)
        results = {}
        for threads in THREADS:
            save = os.path.join(work, f"state-{threads}.safetensors")
            env = dict(os.environ, MEMOPT_NUM_THREADS=str(threads),
                       OPENBLAS_NUM_THREADS="1")
            run = subprocess.run(
                [os.path.join(out, "train"), "--params",
                 os.path.join(work, "model.safetensors"), "--batch",
                 os.path.join(work, "batch.safetensors"), "--steps",
                 str(STEPS), "--save", save],
                check=True, capture_output=True, text=True, env=env)
            with open(save, "rb") as f:
                results[threads] = (run.stdout, f.read())
        reference = results[THREADS[0]]
        differ = [t for t in THREADS if results[t] != reference]
        if differ:
            ok = False
            for t in differ:
                what = ("losses" if results[t][0] != reference[0]
                        else "state")
                print(f"{label}: MISMATCH with {t} threads: the {what} "
                      f"differ from 1 thread's")
        else:
            print(f"{label}: {STEPS} steps, "
                  f"{' '.join(map(str, THREADS))} threads: identical losses "
                  "and state")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
