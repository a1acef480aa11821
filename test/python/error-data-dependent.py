# A comparison of values computed from the inputs has no memopt op.
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

class Step(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, 0.0)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = Step()

    def forward(self, x):
        return self.act(self.fc(x)).sum()


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: unsupported op 'operator.gt' in module 'act'
