# Indexing by a mask computed from the inputs has a shape that depends on
# the data, which a static step cannot hold.
#
# REQUIRES: torch
# RUN: rm -f %t.mlir %t.safetensors
# RUN: not %python %s %t 2>&1 | FileCheck %s
# RUN: not test -e %t.mlir
# RUN: not test -e %t.safetensors

import sys

import torch
import torch.nn as nn

import memopt

class Step(nn.Module):
    def forward(self, x):
        return x[x > 0]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = Step()

    def forward(self, x):
        return self.act(self.fc(x)).sum()


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: operator.getitem in module 'act': indexing with a bool mask computed in the step is not supported: the result's shape would depend on the data
