# nn.InstanceNorm1d/2d that track running statistics, in training: each
# step moves them by momentum towards the batch's average of each sample's
# per-channel mean and unbiased variance, as PyTorch does, and they are the
# step's state like batch norm's. Checked against the parity oracle in
# FP32: 5 AdamW losses, the final parameters and running statistics, and
# the first-step gradients.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: instance norm: trajectory: 5 losses and 10 tensors within the oracle
# CHECK: instance norm: gradients: 6 tensors within the oracle
# CHECK: state: norm2d.running_mean norm2d.running_var norm1d.running_mean norm1d.running_var

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm2d = nn.InstanceNorm2d(4, affine=True,
                                        track_running_stats=True)
        self.norm1d = nn.InstanceNorm1d(4, momentum=0.3,
                                        track_running_stats=True)
        self.head = nn.Linear(4 * 25, 3)

    def forward(self, x, y):
        h = F.relu(self.norm2d(self.conv(x)))
        h = self.norm1d(h.flatten(2))
        return F.cross_entropy(self.head(h.flatten(1)), y)


def main():
    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = Model()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": 2.0 + torch.randn(4, 3, 5, 5, generator=generator),
             "y": torch.tensor([0, 2, 1, 2])}
    ok = memopt_run.export_and_check("instance norm", model, batch, workdir,
                                     STEPS)
    with open(os.path.join(workdir, "model.mlir")) as f:
        names = [line.split('memopt.name = "')[1].split('"')[0]
                 for line in f if 'memopt.role = "state"' in line]
    print("state: " + " ".join(names))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
