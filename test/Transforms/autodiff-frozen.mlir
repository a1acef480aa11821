// RUN: memopt-opt %s -split-input-file --memopt-autodiff="optimizer=sgd" | FileCheck %s

// A frozen weight gets no gradient, no update and no optimizer state; the
// input gradient still flows through it to a trained layer below. Below the
// first trained value nothing runs backward.

// Frozen head over a trained layer: the backward is the head's input
// gradient and the trained layer's weight gradient, two products.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x4xf32> {memopt.name = "fc1.weight", memopt.role = "param"}
// CHECK-SAME: %[[W2:[^:]*]]: tensor<3x8xf32> {memopt.name = "fc2.weight", memopt.role = "frozen"}
// CHECK-SAME: %{{[^:]*}}: tensor<8x4xf32> {memopt.name = "optimizer.fc1.weight.momentum_buffer", memopt.role = "optim"}
// CHECK-SAME: %{{[^:]*}}: tensor<i64> {memopt.name = "optimizer.step", memopt.role = "optim"})
// CHECK-SAME: -> (tensor<f32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<i64>)
// CHECK-COUNT-2: memopt.matmul
// CHECK: %[[DH:.*]] = memopt.matmul %{{.*}}, %[[W2]] : tensor<2x3xf32>, tensor<3x8xf32> -> tensor<2x8xf32>
// CHECK-NOT: tensor<3x8xf32>
// CHECK: %[[DW1:.*]] = memopt.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<2x8xf32>, tensor<2x4xf32> -> tensor<8x4xf32>
// CHECK-NOT: memopt.matmul
// CHECK: memopt.sgd_update %[[W1]], %[[DW1]]
// CHECK-NOT: memopt.sgd_update
// CHECK: return
func.func @frozen_head(%x: tensor<2x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                       %w1: tensor<8x4xf32> {memopt.role = "param", memopt.name = "fc1.weight"},
                       %w2: tensor<3x8xf32> {memopt.role = "frozen", memopt.name = "fc2.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %h = memopt.matmul %x, %w1 transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %r = memopt.relu %h : tensor<2x8xf32>
  %y = memopt.matmul %r, %w2 transpose_rhs : tensor<2x8xf32>, tensor<3x8xf32> -> tensor<2x3xf32>
  %s = memopt.reduce_sum %y dims [0, 1] : tensor<2x3xf32> to tensor<f32>
  return %s : tensor<f32>
}

// -----

// Frozen base under a trained head: only the head's weight gradient; no
// input gradient of the head, nothing through the base.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {memopt.name = "fc1.weight", memopt.role = "frozen"}
// CHECK-SAME: -> (tensor<f32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<i64>)
// CHECK-COUNT-2: memopt.matmul
// CHECK: memopt.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<2x3xf32>, tensor<2x8xf32> -> tensor<3x8xf32>
// CHECK-NOT: memopt.matmul
// CHECK-NOT: memopt.relu_grad
// CHECK: memopt.sgd_update
// CHECK-NOT: memopt.sgd_update
// CHECK: return
func.func @frozen_base(%x: tensor<2x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                       %w1: tensor<8x4xf32> {memopt.role = "frozen", memopt.name = "fc1.weight"},
                       %w2: tensor<3x8xf32> {memopt.role = "param", memopt.name = "fc2.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %h = memopt.matmul %x, %w1 transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %r = memopt.relu %h : tensor<2x8xf32>
  %y = memopt.matmul %r, %w2 transpose_rhs : tensor<2x8xf32>, tensor<3x8xf32> -> tensor<2x3xf32>
  %s = memopt.reduce_sum %y dims [0, 1] : tensor<2x3xf32> to tensor<f32>
  return %s : tensor<f32>
}
