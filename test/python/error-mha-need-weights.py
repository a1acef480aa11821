# nn.MultiheadAttention returns averaged attention weights by default
# (need_weights=True). memopt never forms them (the attention is fused), so
# a model that ignores them exports, and one that reads them is an error that
# names the module.
#
# REQUIRES: torch
# RUN: not %python %s %t 2>&1 | FileCheck %s
# RUN: not test -e %t.mlir
# RUN: not test -e %t.safetensors

import sys

import torch
import torch.nn as nn

import memopt


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        out, weights = self.attn(x, x, x)
        return out.sum() + weights.sum()


memopt.export(Model(), (torch.randn(2, 5, 8),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: nn.MultiheadAttention in module 'attn': need_weights=True and the attention weights (the second result) are used: memopt fuses attention and never forms the weights; pass need_weights=False, or leave them unused
