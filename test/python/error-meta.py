# Meta-device models: parameters split across devices, and a constant that
# would come from a meta buffer, are refused with a clear message.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: not %python %s %t mixed 2>&1 | FileCheck %s --check-prefix=MIXED
# RUN: not %python %s %t buffer 2>&1 | FileCheck %s --check-prefix=BUFFER
# RUN: not test -e %t/model.mlir

import sys

import torch
import torch.nn as nn

import memopt


class Model(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.fc1 = nn.Linear(4, 4, device="meta")
        self.fc2 = nn.Linear(4, 4, device=device)
        self.register_buffer("scale", torch.ones(4, device=device))

    def forward(self, x):
        return (self.fc2(self.fc1(x)) * self.scale).sum()


device = "cpu" if sys.argv[2] == "mixed" else "meta"
memopt.export(Model(device), (torch.randn(2, 4),),
              sys.argv[1] + "/model.mlir")
# MIXED: memopt.exporter.ExportError: some parameters are on the meta device and 'fc2.weight' is not: put the whole model on one device
# BUFFER: memopt.exporter.ExportError: operator.mul at the top level: a constant operand is computed from tensors on the meta device and has no value: keep the model's buffers on the CPU (only parameters may be on meta)
