# The example arguments must match forward()'s parameters.
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
        return F.cross_entropy(self.fc(x), y)


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: Model.forward() takes 2 argument(s) (x, y) but 1 example argument(s) were given
