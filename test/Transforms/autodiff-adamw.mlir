// RUN: memopt-opt %s --memopt-autodiff="lr=0.01 beta1=0.8 beta2=0.99 eps=1e-6 weight-decay=0.1" | FileCheck %s

// AdamW keeps two moments per parameter, after the loss function's own
// arguments, and one step counter; a shared (2-D) weight of a batched
// product gets one product over the flattened rows.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3x4xf32> {memopt.batch_dim = 0 : i64, memopt.name = "x", memopt.role = "input"}, %[[W:[^:]*]]: tensor<5x4xf32> {memopt.name = "fc.weight", memopt.role = "param"},
// CHECK-SAME: %[[M:[^:]*]]: tensor<5x4xf32> {memopt.name = "optimizer.fc.weight.exp_avg", memopt.role = "optim"},
// CHECK-SAME: %[[V:[^:]*]]: tensor<5x4xf32> {memopt.name = "optimizer.fc.weight.exp_avg_sq", memopt.role = "optim"},
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {memopt.name = "optimizer.step", memopt.role = "optim"})
// CHECK: %[[ONES:.*]] = memopt.broadcast %{{.*}} dims [] : tensor<f32> to tensor<2x3x5xf32>
// CHECK: %[[XR:.*]] = memopt.reshape %[[X]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK: %[[GR:.*]] = memopt.reshape %[[ONES]] : tensor<2x3x5xf32> to tensor<6x5xf32>
// CHECK: %[[DW:.*]] = memopt.matmul %[[GR]], %[[XR]] transpose_lhs : tensor<6x5xf32>, tensor<6x4xf32> -> tensor<5x4xf32>
// CHECK: %[[T1:.*]] = memopt.increment %[[STEP]]
// CHECK: %[[NW:.*]], %[[NM:.*]], %[[NV:.*]] = memopt.adamw_update %[[W]], %[[DW]], %[[M]], %[[V]] step %[[T1]] lr 1.000000e-02 betas(8.000000e-01, 0.98999999999999999) eps 9.9999999999999995E-7 weight_decay 1.000000e-01
// CHECK: return %{{.*}}, %[[NW]], %[[NM]], %[[NV]], %[[T1]] : tensor<f32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<i64>
func.func @batched_linear(%x: tensor<2x3x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                          %w: tensor<5x4xf32> {memopt.role = "param", memopt.name = "fc.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %x, %w transpose_rhs : tensor<2x3x4xf32>, tensor<5x4xf32> -> tensor<2x3x5xf32>
  %s = memopt.reduce_sum %y dims [0, 1, 2] : tensor<2x3x5xf32> to tensor<f32>
  return %s : tensor<f32>
}
