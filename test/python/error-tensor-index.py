# Indexing with a bool mask (a data-dependent shape in general) is refused;
# an integer index tensor gathers rows (exporter-ops-vs-pytorch.py).
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
        self.fc = nn.Linear(4, 4)
        self.register_buffer("rows", torch.tensor([True, False, True]))

    def forward(self, x):
        return self.fc(x)[self.rows].sum()


memopt.export(Model(), (torch.randn(3, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: operator.getitem at the top level: indexing with a torch.bool tensor of shape [3] is not supported (only an integer tensor of rank 1 or more, which gathers rows)
