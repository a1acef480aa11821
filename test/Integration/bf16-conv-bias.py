# A convolution with a bias under --mixed-precision=bf16 (most CNNs, ViT
# patch embeddings): the bias gradient is a sum over the batch and the
# spatial dimensions, which bufferization splits into two reductions, the
# second from an f32 intermediate into the bf16 result. The step must run
# and pass the parity oracle against torch.autocast (docs/Reliability.md):
# 5 losses and the first-step gradients.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: conv-bias bf16: trajectory: 5 losses within the oracle
# CHECK: conv-bias bf16: gradients: 4 tensors within the oracle

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5


class ConvBias(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x, y):
        h = F.relu(self.conv(x)).mean((2, 3))
        return F.cross_entropy(self.fc(h), y)


def main():
    import memopt
    from memopt.testing import Oracle
    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = ConvBias()
    batch = {"x": torch.randn(8, 3, 8, 8), "y": torch.randint(0, 10, (8,))}
    oracle = Oracle(model, batch, STEPS, memopt_run.adamw, precision="bf16")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    ok = memopt_run.check_parity("conv-bias bf16", oracle, mlir, workdir,
                                 STEPS, "--mixed-precision=bf16",
                                 compare_state=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
