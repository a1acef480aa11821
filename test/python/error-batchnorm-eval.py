# Batch norm must be exported in training mode.
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
        self.conv = nn.Conv2d(1, 2, 3)
        self.bn = nn.BatchNorm2d(2)

    def forward(self, x):
        return self.bn(self.conv(x)).sum()


memopt.export(Model().eval(), (torch.randn(2, 1, 5, 5),),
              sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: nn.BatchNorm2d in module 'bn': the module is in eval mode: export a model in training mode (model.train())
