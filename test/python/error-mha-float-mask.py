# A float attn_mask is added to the attention scores. memopt takes it only
# as a constant of 0 and -inf (what nn.Transformer's
# generate_square_subsequent_mask makes), which it turns into a bool mask;
# an additive bias is an error that names the module.
#
# REQUIRES: torch
# RUN: not %python %s %t 2>&1 | FileCheck %s
# RUN: not test -e %t.mlir
# RUN: not test -e %t.safetensors

import sys

import torch
import torch.nn as nn

import memopt

LENGTH = 5


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        # An ALiBi-like distance penalty.
        position = torch.arange(LENGTH, dtype=torch.float32)
        self.register_buffer(
            "bias", -(position[:, None] - position[None, :]).abs() * 0.5)

    def forward(self, x):
        out, _ = self.attn(x, x, x, attn_mask=self.bias)
        return out.sum()


memopt.export(Model(), (torch.randn(2, LENGTH, 8),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: nn.MultiheadAttention in module 'attn': the float attn_mask holds values other than 0 and -inf: memopt supports a float mask only as a constant of 0 (attend) and -inf (masked), which it turns into a bool mask; an additive bias is not supported
