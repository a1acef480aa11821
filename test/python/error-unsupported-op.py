# An op memopt has no counterpart for is named, with its module path.
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

class Attention(nn.Module):
    def forward(self, x):
        return torch.logcumsumexp(x, dim=1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x):
        return self.attn(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block()])
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.blocks[0](self.fc(x)).sum()


memopt.export(Model(), (torch.randn(2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: unsupported op 'torch.logcumsumexp' in module 'blocks.0.attn'
