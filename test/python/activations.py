# The hard activations, mish and the clamps: nn.ReLU6, F.relu6, nn.Hardtanh
# and F.hardtanh are clamps whose gradient stops at the bounds
# (`inclusive = false`); torch.clamp, clip, clamp_min and clamp_max (function
# and method forms) pass it there (the default, not printed).
#
# REQUIRES: torch
# RUN: %python %s %t && memopt-opt %t.mlir | FileCheck %s

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.relu6 = nn.ReLU6()
        self.hardtanh = nn.Hardtanh(-2.0, 2.5)
        self.hardswish = nn.Hardswish()
        self.hardsigmoid = nn.Hardsigmoid()
        self.mish = nn.Mish()

    def forward(self, x):
        h = self.fc(x)
        modules = (self.relu6(h) + self.hardtanh(h) + self.hardswish(h) +
                   self.hardsigmoid(h) + self.mish(h))
        functions = (F.relu6(h) + F.hardtanh(h, min_val=-0.5) +
                     F.hardswish(h) + F.hardsigmoid(h) +
                     F.mish(h))
        clamps = (torch.clamp(h, -1, 1) + h.clamp(min=0.5) +
                  torch.clamp_min(h, -0.25) + h.clamp_max(3) +
                  torch.clip(h, max=2.0) + h.clip(-3.0, 3.0))
        return (modules + functions + clamps).sum()


torch.manual_seed(0)
memopt.export(Model(), (torch.randn(4, 8),), sys.argv[1] + ".mlir")

# CHECK-LABEL: func.func @forward(
# CHECK: %[[H:.*]] = memopt.add {{.*}} {memopt.scope = "fc"}
# CHECK: memopt.clamp %[[H]] min 0.000000e+00 max 6.000000e+00 inclusive = false {memopt.scope = "relu6"} : tensor<4x8xf32>
# CHECK: memopt.clamp %[[H]] min -2.000000e+00 max 2.500000e+00 inclusive = false {memopt.scope = "hardtanh"}
# CHECK: memopt.hardswish %[[H]] {memopt.scope = "hardswish"} : tensor<4x8xf32>
# CHECK: memopt.hardsigmoid %[[H]] {memopt.scope = "hardsigmoid"} : tensor<4x8xf32>
# CHECK: memopt.mish %[[H]] {memopt.scope = "mish"} : tensor<4x8xf32>
# CHECK: memopt.clamp %[[H]] min 0.000000e+00 max 6.000000e+00 inclusive = false {memopt.scope = ""}
# CHECK: memopt.clamp %[[H]] min -5.000000e-01 max 1.000000e+00 inclusive = false {memopt.scope = ""}
# CHECK: memopt.hardswish %[[H]] {memopt.scope = ""}
# CHECK: memopt.hardsigmoid %[[H]] {memopt.scope = ""}
# CHECK: memopt.mish %[[H]] {memopt.scope = ""}
# CHECK: memopt.clamp %[[H]] min -1.000000e+00 max 1.000000e+00 {memopt.scope = ""}
# CHECK: memopt.clamp %[[H]] min 5.000000e-01 {memopt.scope = ""}
# CHECK: memopt.clamp %[[H]] min -2.500000e-01 {memopt.scope = ""}
# CHECK: memopt.clamp %[[H]] max 3.000000e+00 {memopt.scope = ""}
# CHECK: memopt.clamp %[[H]] max 2.000000e+00 {memopt.scope = ""}
# CHECK: memopt.clamp %[[H]] min -3.000000e+00 max 3.000000e+00 {memopt.scope = ""}
