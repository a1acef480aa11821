# Loss options memopt does not implement are refused: label smoothing of 1
# (PyTorch allows [0, 1]; memopt.cross_entropy takes [0, 1)).
#
# REQUIRES: torch
# RUN: not %python %s %t 2>&1 | FileCheck %s
# RUN: not test -e %t.mlir
# RUN: not test -e %t.safetensors

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        return F.cross_entropy(self.fc(x), y, label_smoothing=1.0)


memopt.export(Model(), (torch.randn(2, 4), torch.tensor([0, 2])),
              sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: torch.nn.functional.cross_entropy at the top level: label_smoothing=1.0 is not supported: memopt takes it in [0, 1)
