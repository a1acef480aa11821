# Half-precision parameters are refused: memopt assigns precision itself.
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
        return self.fc(x).sum()


memopt.export(Model().half(), (torch.randn(2, 4),),
              sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: parameter 'fc.weight' is torch.float16: only float32 parameters are supported for now
