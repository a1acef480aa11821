# A torch.nn module memopt cannot express is named, with its path.
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

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 4)

    def forward(self, x):
        return self.rnn(x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()

    def forward(self, x):
        return self.encoder(x)[0].sum()


memopt.export(Model(), (torch.randn(3, 2, 4),), sys.argv[1] + ".mlir")
# CHECK: memopt.exporter.ExportError: unsupported module 'nn.LSTM' (module 'encoder.rnn')
