# A ResNet-style CNN: conv (with and without bias), batch norm in training
# mode (running statistics as "state" arguments, returned updated), max and
# average pooling, and a linear classifier.
#
# REQUIRES: torch
# RUN: %python %s %t && memopt-opt %t.mlir | FileCheck %s

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8, eps=1e-3, momentum=0.2)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, images, labels):
        x = self.pool(F.relu(self.bn1(self.conv1(images))))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.avg_pool2d(x, 2)
        x = F.adaptive_avg_pool2d(x, 1)
        return F.cross_entropy(self.fc(torch.flatten(x, 1)), labels)


torch.manual_seed(0)
model = CNN()
before = {k: v.clone() for k, v in model.state_dict().items()}
memopt.export(model, (torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))),
              sys.argv[1] + ".mlir")
# Exporting evaluates the model but must not update its running statistics.
assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())

# CHECK-LABEL: func.func @forward(
# CHECK-SAME: %[[X:[^:]+]]: tensor<4x3x16x16xf32> {memopt.batch_dim = 0 : i64, memopt.name = "images", memopt.role = "input"}
# CHECK-SAME: tensor<4xi64> {memopt.batch_dim = 0 : i64, memopt.name = "labels", memopt.role = "label"}
# CHECK-SAME: %[[W1:[^:]+]]: tensor<8x3x3x3xf32> {memopt.name = "conv1.weight", memopt.role = "param"}
# CHECK-SAME: %[[B1:[^:]+]]: tensor<8xf32> {memopt.name = "conv1.bias", memopt.role = "param"}
# CHECK-SAME: %[[G1:[^:]+]]: tensor<8xf32> {memopt.name = "bn1.weight", memopt.role = "param"}
# CHECK-SAME: %[[BB1:[^:]+]]: tensor<8xf32> {memopt.name = "bn1.bias", memopt.role = "param"}
# CHECK-SAME: %[[W2:[^:]+]]: tensor<16x8x3x3xf32> {memopt.name = "conv2.weight", memopt.role = "param"}
# CHECK-SAME: {memopt.name = "fc.bias", memopt.role = "param"}
# CHECK-SAME: %[[RM1:[^:]+]]: tensor<8xf32> {memopt.name = "bn1.running_mean", memopt.role = "state"}
# CHECK-SAME: %[[RV1:[^:]+]]: tensor<8xf32> {memopt.name = "bn1.running_var", memopt.role = "state"}
# CHECK-SAME: %[[RM2:[^:]+]]: tensor<16xf32> {memopt.name = "bn2.running_mean", memopt.role = "state"}
# CHECK-SAME: %[[RV2:[^:]+]]: tensor<16xf32> {memopt.name = "bn2.running_var", memopt.role = "state"})
# CHECK-SAME: -> (tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>, tensor<16xf32>) attributes {memopt.loss}

# CHECK: %[[C1:.*]] = memopt.conv2d %[[X]], %[[W1]] padding [1, 1] {memopt.scope = "conv1"} : tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32> -> tensor<4x8x16x16xf32>
# CHECK: %[[BC1:.*]] = memopt.broadcast %[[B1]] dims [1] {memopt.scope = "conv1"} : tensor<8xf32> to tensor<4x8x16x16xf32>
# CHECK: %[[A1:.*]] = memopt.add %[[C1]], %[[BC1]] {memopt.scope = "conv1"} : tensor<4x8x16x16xf32>
# CHECK: %[[Y1:.*]], %{{.*}}, %{{.*}}, %[[NRM1:.*]], %[[NRV1:.*]] = memopt.batch_norm %[[A1]], %[[G1]], %[[BB1]], %[[RM1]], %[[RV1]] eps 1.000000e-03 momentum 2.000000e-01 {memopt.scope = "bn1"} : tensor<4x8x16x16xf32>, tensor<8xf32>
# CHECK: %[[R1:.*]] = memopt.relu %[[Y1]] {memopt.scope = ""} : tensor<4x8x16x16xf32>
# CHECK: %[[P1:.*]] = memopt.max_pool2d %[[R1]] kernel [2, 2] strides [2, 2] {memopt.scope = "pool"} : tensor<4x8x16x16xf32> to tensor<4x8x8x8xf32>
# CHECK-NOT: memopt.add
# CHECK: %[[C2:.*]] = memopt.conv2d %[[P1]], %[[W2]] strides [2, 2] padding [1, 1] {memopt.scope = "conv2"} : tensor<4x8x8x8xf32>, tensor<16x8x3x3xf32> -> tensor<4x16x4x4xf32>
# CHECK: %[[Y2:.*]], %{{.*}}, %{{.*}}, %[[NRM2:.*]], %[[NRV2:.*]] = memopt.batch_norm %[[C2]], {{.*}} eps 1.000000e-05 momentum 1.000000e-01 {memopt.scope = "bn2"} : tensor<4x16x4x4xf32>, tensor<16xf32>
# CHECK: memopt.avg_pool2d %{{.*}} kernel [2, 2] strides [2, 2] {memopt.scope = ""} : tensor<4x16x4x4xf32> to tensor<4x16x2x2xf32>
# CHECK: memopt.avg_pool2d %{{.*}} kernel [2, 2] strides [2, 2] {memopt.scope = ""} : tensor<4x16x2x2xf32> to tensor<4x16x1x1xf32>
# CHECK: memopt.reshape %{{.*}} {memopt.scope = ""} : tensor<4x16x1x1xf32> to tensor<4x16xf32>
# CHECK: memopt.matmul {{.*}} transpose_rhs {memopt.scope = "fc"} : tensor<4x16xf32>, tensor<10x16xf32> -> tensor<4x10xf32>
# CHECK: %[[LOSS:.*]] = memopt.cross_entropy
# CHECK: return %[[LOSS]], %[[NRM1]], %[[NRV1]], %[[NRM2]], %[[NRV2]] : tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<16xf32>, tensor<16xf32>
