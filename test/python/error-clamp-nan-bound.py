# A NaN bound of torch.clamp (which would make every element NaN) is
# refused with the op and its module named.
#
# REQUIRES: torch
# RUN: not %python %s %t 2>&1 | FileCheck %s
# RUN: not test -e %t.mlir
# RUN: not test -e %t.safetensors

import sys

import torch
import torch.nn as nn

import memopt


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.clamp(self.fc(x), min=float("nan"))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x).sum()


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: torch.clamp in module 'block': the bound 'min' is NaN
