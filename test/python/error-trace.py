# torch.fx failures are reported as export errors.
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
        batch, features = x.shape
        return self.fc(x).sum() * features


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: torch.fx could not trace Model.forward(): TraceError: Proxy object cannot be iterated
