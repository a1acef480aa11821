# Matrix products: a tied embedding used as an output head (as x @ W.t() and
# as F.linear), batched products whose batch dimensions PyTorch broadcasts,
# bmm with a transposed operand, and a matrix-vector product.
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
        self.wte = nn.Embedding(20, 8)
        self.a = nn.Parameter(torch.randn(2, 3, 4, 8))
        self.b = nn.Parameter(torch.randn(3, 8, 5))
        self.v = nn.Parameter(torch.randn(8))

    def forward(self, idx):
        x = self.wte(idx)
        logits = x @ self.wte.weight.t()
        y = torch.matmul(self.a, self.b)
        z = torch.bmm(x, x.transpose(1, 2))
        w = x @ self.v
        return logits.sum() + y.sum() + z.mean() + w.sum() + \
            F.linear(x, self.wte.weight).mean()


torch.manual_seed(0)
memopt.export(Model(), (torch.randint(0, 20, (2, 4)),), sys.argv[1] + ".mlir")

# CHECK-LABEL: func.func @forward(
# CHECK-SAME: %[[IDX:[^:]+]]: tensor<2x4xi64> {memopt.batch_dim = 0 : i64, memopt.name = "idx", memopt.role = "input"}
# CHECK-SAME: %[[A:[^:]+]]: tensor<2x3x4x8xf32> {memopt.name = "a", memopt.role = "param"}
# CHECK-SAME: %[[B:[^:]+]]: tensor<3x8x5xf32> {memopt.name = "b", memopt.role = "param"}
# CHECK-SAME: %[[V:[^:]+]]: tensor<8xf32> {memopt.name = "v", memopt.role = "param"}
# CHECK-SAME: %[[WTE:[^:]+]]: tensor<20x8xf32> {memopt.name = "wte.weight", memopt.role = "param"})
# CHECK: %[[X:.*]] = memopt.embedding %[[WTE]], %[[IDX]] {memopt.scope = "wte"}

# x @ W.t(): the transpose folds into the matmul.
# CHECK-NOT: memopt.transpose
# CHECK: memopt.matmul %[[X]], %[[WTE]] transpose_rhs {memopt.scope = ""} : tensor<2x4x8xf32>, tensor<20x8xf32> -> tensor<2x4x20xf32>

# [2, 3, 4, 8] @ [3, 8, 5]: the batch dimensions are broadcast explicitly.
# CHECK: %[[BB:.*]] = memopt.broadcast %[[B]] dims [1, 2, 3] {memopt.scope = ""} : tensor<3x8x5xf32> to tensor<2x3x8x5xf32>
# CHECK: memopt.matmul %[[A]], %[[BB]] {memopt.scope = ""} : tensor<2x3x4x8xf32>, tensor<2x3x8x5xf32> -> tensor<2x3x4x5xf32>

# bmm(x, x^T).
# CHECK: memopt.matmul %[[X]], %[[X]] transpose_rhs {memopt.scope = ""} : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x4xf32>

# x @ v: the vector becomes a column and the result drops it.
# CHECK: %[[COL:.*]] = memopt.reshape %[[V]] {memopt.scope = ""} : tensor<8xf32> to tensor<8x1xf32>
# CHECK: %[[XV:.*]] = memopt.matmul %[[X]], %[[COL]] {memopt.scope = ""} : tensor<2x4x8xf32>, tensor<8x1xf32> -> tensor<2x4x1xf32>
# CHECK: memopt.reshape %[[XV]] {memopt.scope = ""} : tensor<2x4x1xf32> to tensor<2x4xf32>

# F.linear with the tied weight, no bias.
# CHECK: memopt.matmul %[[X]], %[[WTE]] transpose_rhs {memopt.scope = ""} : tensor<2x4x8xf32>, tensor<20x8xf32> -> tensor<2x4x20xf32>
# CHECK-NOT: memopt.add %{{.*}} : tensor<2x4x20xf32>
# CHECK: memopt.reduce_mean %{{.*}} dims [0, 1, 2] {memopt.scope = ""} : tensor<2x4x20xf32> to tensor<f32>
