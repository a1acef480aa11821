# forward() must return the scalar loss.
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
        return self.fc(x)


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: Model.forward() must return the scalar float32 loss; it returns tensor<2x4xf32>
