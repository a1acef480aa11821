# A two-layer perceptron: nn.Linear as matmul (transpose_rhs) + broadcast +
# add, relu, and cross-entropy; the class-index argument is a label.
#
# REQUIRES: torch
# RUN: %python %s %t && memopt-opt %t.mlir | FileCheck %s

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y)


torch.manual_seed(0)
memopt.export(MLP(), (torch.randn(32, 64), torch.randint(0, 10, (32,))),
              sys.argv[1] + ".mlir")

# CHECK-LABEL: func.func @forward(
# CHECK-SAME: %[[X:[^:]+]]: tensor<32x64xf32> {memopt.batch_dim = 0 : i64, memopt.name = "x", memopt.role = "input"},
# CHECK-SAME: %[[Y:[^:]+]]: tensor<32xi64> {memopt.batch_dim = 0 : i64, memopt.name = "y", memopt.role = "label"},
# CHECK-SAME: %[[W1:[^:]+]]: tensor<128x64xf32> {memopt.name = "fc1.weight", memopt.role = "param"},
# CHECK-SAME: %[[B1:[^:]+]]: tensor<128xf32> {memopt.name = "fc1.bias", memopt.role = "param"},
# CHECK-SAME: %[[W2:[^:]+]]: tensor<10x128xf32> {memopt.name = "fc2.weight", memopt.role = "param"},
# CHECK-SAME: %[[B2:[^:]+]]: tensor<10xf32> {memopt.name = "fc2.bias", memopt.role = "param"})
# CHECK-SAME: -> tensor<f32> attributes {memopt.loss}
# CHECK-NEXT: %[[M1:.*]] = memopt.matmul %[[X]], %[[W1]] transpose_rhs {memopt.scope = "fc1"} : tensor<32x64xf32>, tensor<128x64xf32> -> tensor<32x128xf32>
# CHECK-NEXT: %[[BB1:.*]] = memopt.broadcast %[[B1]] dims [1] {memopt.scope = "fc1"} : tensor<128xf32> to tensor<32x128xf32>
# CHECK-NEXT: %[[H1:.*]] = memopt.add %[[M1]], %[[BB1]] {memopt.scope = "fc1"} : tensor<32x128xf32>
# CHECK-NEXT: %[[R:.*]] = memopt.relu %[[H1]] {memopt.scope = ""} : tensor<32x128xf32>
# CHECK-NEXT: %[[M2:.*]] = memopt.matmul %[[R]], %[[W2]] transpose_rhs {memopt.scope = "fc2"} : tensor<32x128xf32>, tensor<10x128xf32> -> tensor<32x10xf32>
# CHECK-NEXT: %[[BB2:.*]] = memopt.broadcast %[[B2]] dims [1] {memopt.scope = "fc2"} : tensor<10xf32> to tensor<32x10xf32>
# CHECK-NEXT: %[[H2:.*]] = memopt.add %[[M2]], %[[BB2]] {memopt.scope = "fc2"} : tensor<32x10xf32>
# CHECK-NEXT: %[[L:.*]] = memopt.cross_entropy %[[H2]], %[[Y]] {memopt.scope = ""} : tensor<32x10xf32>, tensor<32xi64>
# CHECK-NEXT: return %[[L]] : tensor<f32>
