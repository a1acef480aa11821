# What torch.fx still cannot trace is reported as an export error: a Python
# branch on a tensor's value (shapes are known while tracing, values are
# not; test/python/trace-shapes.py covers what traces).
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

    def forward(self, x):
        batch, features = x.shape  # fine: shapes are static
        h = self.fc(x)
        if h.sum() > 0:            # not: the branch depends on the data
            h = F.relu(h)
        return h.sum() * features


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: torch.fx could not trace Model.forward(): TraceError: symbolically traced variables cannot be used as inputs to control flow: a branch on a tensor's value cannot be exported (memopt compiles one graph for every batch; compute both sides and select with torch.where)
