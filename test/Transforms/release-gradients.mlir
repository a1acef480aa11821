// RUN: memopt-opt -split-input-file --memopt-autodiff="optimizer=adamw" --memopt-release-gradients %s | FileCheck %s
// RUN: memopt-opt -split-input-file --memopt-mixed-precision="compute-type=fp16" --memopt-autodiff="optimizer=adamw" --memopt-release-gradients %s | FileCheck %s --check-prefix=FP16

// --memopt-release-gradients: each optimizer update runs as soon as its
// gradient is complete and nothing else reads the parameter's old value.

// Two linears: fc2's bias gradient is complete first; fc2's weight is also
// read by the input gradient (the matmul into fc1's gradient), so its update
// waits for that; fc1's follow their gradients. The step counter is
// incremented right before the first update.
// CHECK-LABEL: func.func @train_step
// CHECK: memopt.cross_entropy_grad
// CHECK: %[[DB2:.*]] = memopt.reduce_sum %{{.*}} dims [0] {memopt.scope = "fc2"}
// CHECK-NEXT: %[[STEP:.*]] = memopt.increment %arg14
// CHECK-NEXT: memopt.adamw_update %arg5, %[[DB2]], %arg12, %arg13 step %[[STEP]]
// CHECK: %[[DX:.*]] = memopt.matmul %{{.*}}, %arg4 {memopt.scope = "fc2"}
// CHECK: %[[DW2:.*]] = memopt.matmul %{{.*}} transpose_lhs {memopt.scope = "fc2"}
// CHECK-NEXT: memopt.adamw_update %arg4, %[[DW2]], %arg10, %arg11 step %[[STEP]]
// CHECK: %[[DB1:.*]] = memopt.reduce_sum %{{.*}} dims [0] {memopt.scope = "fc1"}
// CHECK-NEXT: memopt.adamw_update %arg3, %[[DB1]]
// CHECK: %[[DW1:.*]] = memopt.matmul %{{.*}}, %arg0 transpose_lhs {memopt.scope = "fc1"}
// CHECK-NEXT: memopt.adamw_update %arg2, %[[DW1]]
// CHECK-NEXT: return
// Under FP16 dynamic loss scaling the skip decision needs every gradient:
// the updates stay after the unscale.
// FP16-LABEL: func.func @train_step
// FP16: memopt.unscale
// FP16: memopt.increment
// FP16-COUNT-4: memopt.adamw_update
// FP16: return
func.func @mlp(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x"},
               %y: tensor<4xi64> {memopt.role = "label", memopt.name = "y"},
               %w1: tensor<16x8xf32> {memopt.role = "param", memopt.name = "fc1.weight"},
               %b1: tensor<16xf32> {memopt.role = "param", memopt.name = "fc1.bias"},
               %w2: tensor<3x16xf32> {memopt.role = "param", memopt.name = "fc2.weight"},
               %b2: tensor<3xf32> {memopt.role = "param", memopt.name = "fc2.bias"}) -> tensor<f32>
    attributes {memopt.loss} {
  %h = memopt.matmul %x, %w1 transpose_rhs {memopt.scope = "fc1"} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %hb = memopt.broadcast %b1 dims [1] {memopt.scope = "fc1"} : tensor<16xf32> to tensor<4x16xf32>
  %h1 = memopt.add %h, %hb {memopt.scope = "fc1"} : tensor<4x16xf32>
  %a = memopt.relu %h1 : tensor<4x16xf32>
  %z = memopt.matmul %a, %w2 transpose_rhs {memopt.scope = "fc2"} : tensor<4x16xf32>, tensor<3x16xf32> -> tensor<4x3xf32>
  %zb = memopt.broadcast %b2 dims [1] {memopt.scope = "fc2"} : tensor<3xf32> to tensor<4x3xf32>
  %z1 = memopt.add %z, %zb {memopt.scope = "fc2"} : tensor<4x3xf32>
  %l = memopt.cross_entropy %z1, %y : tensor<4x3xf32>, tensor<4xi64>
  return %l : tensor<f32>
}

// -----

// A reshape of the parameter is a view of its buffer: the update waits for
// the view's last reader too (the backward's product with it). x's update
// follows both its gradient and the weight gradient that reads x.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[V:.*]] = memopt.reshape %arg1
// CHECK: %[[DX:.*]] = memopt.matmul %{{.*}}, %[[V]] :
// CHECK: memopt.matmul %{{.*}}, %arg0 transpose_lhs
// CHECK: memopt.adamw_update %arg0, %[[DX]],
// CHECK: memopt.adamw_update %arg1,
func.func @view(%x: tensor<4x8xf32> {memopt.role = "param", memopt.name = "x"},
                %w: tensor<2x4x8xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32>
    attributes {memopt.loss} {
  %v = memopt.reshape %w : tensor<2x4x8xf32> to tensor<8x8xf32>
  %h = memopt.matmul %x, %v transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %t = memopt.tanh %h : tensor<4x8xf32>
  %l = memopt.reduce_sum %t dims [0, 1] : tensor<4x8xf32> to tensor<f32>
  return %l : tensor<f32>
}
