# Elementwise activations, arithmetic with Python numbers, implicit
# broadcasting made explicit, permute/slicing, reductions with keepdim and
# mse_loss with a float label.
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
        self.proj = nn.Linear(8, 8)
        self.scale = nn.Parameter(torch.ones(8))
        self.register_buffer("shift", torch.full((8,), 0.5))

    def forward(self, x, target):
        h = self.proj(x)
        h = F.gelu(h) + torch.sigmoid(h) * h.tanh() - F.silu(h)
        h = h * self.scale + self.shift
        h = 1.0 - h / 2
        h = h ** 2 + 3.0 / (h + 1)
        h = h.permute(0, 2, 1).unsqueeze(1).squeeze(1)
        h = h - h.mean(dim=-1, keepdim=True)
        h = torch.log_softmax(h, dim=1)[:, 1:, ::2]
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        flat = h.reshape(h.shape[0], -1)
        return F.mse_loss(h, target, reduction="sum") * 0.5 + \
            flat.sum() * 0.01


torch.manual_seed(0)
memopt.export(Model(), (torch.randn(4, 6, 8), torch.randn(4, 7, 3)),
              sys.argv[1] + ".mlir")

# CHECK-LABEL: func.func @forward(
# CHECK-SAME: %[[X:[^:]+]]: tensor<4x6x8xf32> {memopt.batch_dim = 0 : i64, memopt.name = "x", memopt.role = "input"}
# CHECK-SAME: %[[T:[^:]+]]: tensor<4x7x3xf32> {memopt.batch_dim = 0 : i64, memopt.name = "target", memopt.role = "label"}
# CHECK-SAME: %[[SCALE:[^:]+]]: tensor<8xf32> {memopt.name = "scale", memopt.role = "param"}
# CHECK-SAME: {memopt.name = "proj.bias", memopt.role = "param"})

# nn.Linear on a 3-D input: the weight is shared by every batch element.
# CHECK: memopt.matmul %[[X]], %{{.*}} transpose_rhs {memopt.scope = "proj"} : tensor<4x6x8xf32>, tensor<8x8xf32> -> tensor<4x6x8xf32>
# CHECK: memopt.broadcast %{{.*}} dims [2] {memopt.scope = "proj"} : tensor<8xf32> to tensor<4x6x8xf32>
# CHECK: %[[H:.*]] = memopt.add
# CHECK: %[[GELU:.*]] = memopt.gelu %[[H]] {memopt.scope = ""} : tensor<4x6x8xf32>
# CHECK: %[[SIG:.*]] = memopt.sigmoid %[[H]]
# CHECK: %[[TANH:.*]] = memopt.tanh %[[H]]
# CHECK: %[[P:.*]] = memopt.mul %[[SIG]], %[[TANH]]
# CHECK: %[[S:.*]] = memopt.add %[[GELU]], %[[P]]
# CHECK: %[[SILU:.*]] = memopt.silu %[[H]]
# CHECK: memopt.sub %[[S]], %[[SILU]] {memopt.scope = ""} : tensor<4x6x8xf32>

# A parameter and a buffer (a constant) broadcast over the batch.
# CHECK: %[[SB:.*]] = memopt.broadcast %[[SCALE]] dims [2] {memopt.scope = ""} : tensor<8xf32> to tensor<4x6x8xf32>
# CHECK: memopt.mul %{{.*}}, %[[SB]]
# CHECK: %[[SHIFT:.*]] = memopt.constant dense<5.000000e-01> : tensor<8xf32>
# CHECK: memopt.broadcast %[[SHIFT]] dims [2]

# 1.0 - h / 2 and h ** 2 + 3.0 / (h + 1).
# CHECK: %[[D:.*]] = memopt.mul_scalar %{{.*}}, 5.000000e-01
# CHECK: %[[N:.*]] = memopt.neg %[[D]]
# CHECK: %[[R:.*]] = memopt.add_scalar %[[N]], 1.000000e+00
# CHECK: %[[SQ:.*]] = memopt.pow_scalar %[[R]], 2.000000e+00
# CHECK: %[[R1:.*]] = memopt.add_scalar %[[R]], 1.000000e+00
# CHECK: %[[INV:.*]] = memopt.pow_scalar %[[R1]], -1.000000e+00
# CHECK: %[[Q:.*]] = memopt.mul_scalar %[[INV]], 3.000000e+00
# CHECK: %[[SUM:.*]] = memopt.add %[[SQ]], %[[Q]]

# permute; unsqueeze(1).squeeze(1) is no reshape at all.
# CHECK: %[[PERM:.*]] = memopt.transpose %[[SUM]] perm [0, 2, 1] {memopt.scope = ""} : tensor<4x6x8xf32> to tensor<4x8x6xf32>
# CHECK-NOT: memopt.reshape
# CHECK: %[[MEAN:.*]] = memopt.reduce_mean %[[PERM]] dims [2] {memopt.scope = ""} : tensor<4x8x6xf32> to tensor<4x8xf32>
# CHECK: %[[KEEP:.*]] = memopt.reshape %[[MEAN]] {{.*}} : tensor<4x8xf32> to tensor<4x8x1xf32>
# CHECK: %[[MB:.*]] = memopt.broadcast %[[KEEP]] dims [0, 1, 2] {{.*}} : tensor<4x8x1xf32> to tensor<4x8x6xf32>
# CHECK: %[[CENTERED:.*]] = memopt.sub %[[PERM]], %[[MB]]
# CHECK: %[[LS:.*]] = memopt.log_softmax %[[CENTERED]] dim 1 {memopt.scope = ""} : tensor<4x8x6xf32>
# CHECK: %[[SL:.*]] = memopt.slice %[[LS]] starts [0, 1, 0] limits [4, 8, 5] strides [1, 1, 2] {memopt.scope = ""} : tensor<4x8x6xf32> to tensor<4x7x3xf32>

# RMS normalisation written out by hand.
# CHECK: memopt.pow_scalar %[[SL]], 2.000000e+00
# CHECK: memopt.reduce_mean %{{.*}} dims [2]
# CHECK: memopt.add_scalar %{{.*}}, 9.9999999999999995E-7
# CHECK: memopt.rsqrt
# CHECK: %[[NORMED:.*]] = memopt.mul %[[SL]],

# The loss: mse with a float label, plus a weighted sum of all elements
# (h.shape[0] is folded).
# CHECK: %[[FLAT:.*]] = memopt.reshape %[[NORMED]] {memopt.scope = ""} : tensor<4x7x3xf32> to tensor<4x21xf32>
# CHECK: %[[MSE:.*]] = memopt.mse_loss %[[NORMED]], %[[T]] reduction<sum> {memopt.scope = ""} : tensor<4x7x3xf32>
# CHECK: %[[HALF:.*]] = memopt.mul_scalar %[[MSE]], 5.000000e-01 {memopt.scope = ""} : tensor<f32>
# CHECK: %[[ALL:.*]] = memopt.reduce_sum %[[FLAT]] dims [0, 1] {memopt.scope = ""} : tensor<4x21xf32> to tensor<f32>
# CHECK: %[[W:.*]] = memopt.mul_scalar %[[ALL]], 1.000000e-02
# CHECK: %[[LOSS:.*]] = memopt.add %[[HALF]], %[[W]] {memopt.scope = ""} : tensor<f32>
# CHECK: return %[[LOSS]] : tensor<f32>
