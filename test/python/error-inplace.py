# In-place ops would make the exported graph read stale values.
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
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(3, 3)) == 0)

    def forward(self, x):
        scores = x @ x.transpose(-2, -1)
        scores.masked_fill_(self.mask, float("-inf"))
        return F.softmax(scores, dim=-1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.attn = Attention()

    def forward(self, x):
        return self.attn(self.fc(x)).sum()


memopt.export(Model(), (torch.randn(2, 3, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: Tensor.masked_fill_ in module 'attn': in-place ops are not supported: use the out-of-place form
