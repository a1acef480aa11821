# Random numbers drawn in forward() (other than dropout) are refused, also
# when their shape is read from an input while tracing: a constant would
# freeze one draw.
#
# REQUIRES: torch
# RUN: not %python %s %t 2>&1 | FileCheck %s
# RUN: not test -e %t.mlir
# RUN: not test -e %t.safetensors

import sys

import torch
import torch.nn as nn

import memopt

class Noisy(nn.Module):
    def forward(self, x):
        return x + 0.1 * torch.randn(x.shape)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.noise = Noisy()

    def forward(self, x):
        return self.fc(self.noise(x)).sum()


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: torch.randn in module 'noise': random numbers outside nn.Dropout/F.dropout are not supported
