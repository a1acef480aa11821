# ZeRO with 8-bit AdamW moments (--optimizer-state=8bit --zero-stage=1|2|3,
# docs/Optimizer.md): each rank updates whole blocks of 256 elements and
# holds their records. On an MLP whose weights (4500 and 4365 elements) do
# not split into whole blocks, each rank owns 9 blocks of each weight (the
# last rank's last block partly padding), the moments' shards are those
# blocks' records, and training over 2 MPI ranks (one BLAS thread) is byte
# for byte the single process with 2 micro-batches: the losses and the
# saved state, in FP32 and BF16 and at every stage (stage 3's parameter
# shards are whole blocks too). The checkpoint is one
# format: ZeRO-2's after 3 steps resumed by the single process gives its 6
# steps.
#
# REQUIRES: torch, mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: shards: 2 packed moments per rank of 9 blocks (2340 B), whole 18 blocks (4680 B)
# CHECK: fp32: ZeRO-2 x 2 ranks vs K=2: 5 losses bit-identical, state byte-identical
# CHECK: fp32: ZeRO-1 x 2 ranks vs K=2: 5 losses bit-identical, state byte-identical
# CHECK: bf16: ZeRO-2 x 2 ranks vs K=2: 5 losses bit-identical, state byte-identical
# CHECK: bf16: ZeRO-3 x 2 ranks vs K=2: 5 losses bit-identical, state byte-identical
# CHECK: resume: ZeRO-2's 3 steps, then 3 in one process, are 6 in one process

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5
EIGHT = ("--optimizer-state=8bit",)


def build():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(100, 45)
            self.fc2 = nn.Linear(45, 97)

        def forward(self, x, y):
            return F.cross_entropy(self.fc2(F.gelu(self.fc1(x))), y)

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    batch = {"x": torch.randn(8, 100, generator=generator),
             "y": torch.randint(0, 97, (8,), generator=generator)}
    return Mlp(), batch


def main():
    import memopt

    workdir = sys.argv[1]
    model, batch = build()
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))

    # The shards the compiler plans: the weights' moments in whole blocks.
    out = os.path.join(workdir, "plan")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS, *EIGHT,
                             "--data-parallel=2", "--zero-stage=2")
    with open(os.path.join(out, "model.json")) as f:
        arguments = json.load(f)["arguments"]
    moments = [a for a in arguments
               if a["role"] == "optim" and a["dtype"] == "u8"]
    sizes = {(tuple(a["shape"]), tuple(a["shard_of"])) for a in moments}
    assert len(moments) == 4 and sizes == {((2340,), (4680,))}, moments
    print("shards: 2 packed moments per rank of 9 blocks (2340 B), whole 18 "
          "blocks (4680 B)")

    print("fp32: " + memopt_run.zero_vs_k2(mlir, workdir, STEPS, *EIGHT))
    print("fp32: " + memopt_run.zero_vs_k2(mlir, workdir, STEPS, *EIGHT,
                                           stage=1))
    print("bf16: " + memopt_run.zero_vs_k2(mlir, workdir, STEPS, *EIGHT,
                                           "--mixed-precision=bf16"))
    print("bf16: " + memopt_run.zero_vs_k2(mlir, workdir, STEPS, *EIGHT,
                                           "--mixed-precision=bf16", stage=3))

    # ZeRO-2's checkpoint (the last call's binaries: BF16) resumed by the
    # single process.
    zero, k2 = (os.path.join(workdir, "out-" + n) for n in ("zero2", "k2"))
    half = os.path.join(workdir, "zero-3.safetensors")
    batch_file = os.path.join(workdir, "batch.safetensors")
    first = memopt_run.losses(subprocess.run(
        memopt_run.MPIRUN + ["-np", "2", os.path.join(zero, "train"),
                             "--params",
                             os.path.join(workdir, "model.safetensors"),
                             "--batch", batch_file, "--steps", "3", "--save",
                             half],
        check=True, capture_output=True, text=True,
        env=memopt_run.MPI_ENV).stdout)
    rest = memopt_run.losses(subprocess.run(
        [os.path.join(k2, "train"), "--params", half, "--batch", batch_file,
         "--steps", "3"], check=True, capture_output=True, text=True,
        env=memopt_run.MPI_ENV).stdout)
    six = memopt_run.losses(memopt_run.train(k2, workdir, 6,
                                             env=memopt_run.MPI_ENV))
    assert first + rest == six, (first, rest, six)
    print("resume: ZeRO-2's 3 steps, then 3 in one process, are 6 in one "
          "process")


if __name__ == "__main__":
    main()
