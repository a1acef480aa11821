// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate=micro-batches=4 -split-input-file | FileCheck %s

// The MLP: forward and backward in one loop over 4 micro-batches of 2, the
// gradients and the loss summed in f32 accumulators as soon as each
// micro-batch's part exists, the optimizer after the loop. The bias broadcast is rebuilt at the micro-batch shape inside the
// loop; the cross-entropy is a sum scaled by one over the full batch's count.

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "fc.weight"},
    %b: tensor<3xf32> {memopt.role = "param", memopt.name = "fc.bias"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w transpose_rhs {memopt.scope = "fc"} : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %1 = memopt.broadcast %b dims [1] {memopt.scope = "fc"} : tensor<3xf32> to tensor<8x3xf32>
  %2 = memopt.add %0, %1 {memopt.scope = "fc"} : tensor<8x3xf32>
  %loss = memopt.cross_entropy %2, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:arg0]]: tensor<8x4xf32> {{[^}]*}}}, %[[Y:arg1]]: tensor<8xi64> {{[^}]*}}}, %[[W:arg2]]: tensor<3x4xf32> {{[^}]*}}}, %[[B:arg3]]: tensor<3xf32>
// CHECK: %[[COUNT:.*]] = memopt.label_count %[[Y]] : tensor<8xi64>
// CHECK: %[[INV:.*]] = memopt.div %{{.*}}, %[[COUNT]] : tensor<f32>
// CHECK-DAG: %[[ZL:.*]] = memopt.constant dense<0.000000e+00> : tensor<f32>
// CHECK-DAG: %[[ZB:.*]] = memopt.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-DAG: %[[ZW:.*]] = memopt.constant dense<0.000000e+00> : tensor<3x4xf32>
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[LOOP:.*]]:3 = scf.for %[[IV:.*]] = %[[C0]] to %[[C4]] step %{{.*}} iter_args(%[[AL:.*]] = %[[ZL]], %[[AB:.*]] = %[[ZB]], %[[AW:.*]] = %[[ZW]])
// CHECK:   %[[OFF:.*]] = arith.muli %[[IV]], %{{.*}} : index
// CHECK:   %[[XS:.*]] = tensor.extract_slice %[[X]][%[[OFF]], 0] [2, 4] [1, 1] : tensor<8x4xf32> to tensor<2x4xf32>
// CHECK:   %[[YS:.*]] = tensor.extract_slice %[[Y]][%{{.*}}] [2] [1] : tensor<8xi64> to tensor<2xi64>
// CHECK:   memopt.matmul %[[XS]], %[[W]] transpose_rhs {{.*}} -> tensor<2x3xf32>
// CHECK:   memopt.broadcast %[[B]] dims [1] {{.*}} : tensor<3xf32> to tensor<2x3xf32>
// CHECK:   %[[SUM:.*]] = memopt.cross_entropy %{{.*}}, %[[YS]] reduction<sum> : tensor<2x3xf32>, tensor<2xi64>
// CHECK:   %[[LMB:.*]] = memopt.mul %[[SUM]], %[[INV]] : tensor<f32>
// CHECK:   %[[NL:.*]] = memopt.add %[[AL]], %[[LMB]] : tensor<f32>
// CHECK:   %[[G:.*]] = memopt.mul %{{.*}}, %[[INV]] : tensor<f32>
// CHECK:   %[[DY:.*]] = memopt.cross_entropy_grad %{{.*}}, %[[YS]], %[[G]] reduction<sum>
// CHECK:   %[[DB:.*]] = memopt.reduce_sum %[[DY]] dims [0]
// CHECK:   %[[NB:.*]] = memopt.add %[[AB]], %[[DB]] {memopt.scope = "fc"} : tensor<3xf32>
// CHECK:   %[[DW:.*]] = memopt.matmul %[[DY]], %[[XS]] transpose_lhs
// CHECK:   %[[NW:.*]] = memopt.add %[[AW]], %[[DW]] {memopt.scope = "fc"} : tensor<3x4xf32>
// CHECK:   scf.yield %[[NL]], %[[NB]], %[[NW]]
// CHECK: } {memopt.micro_batches = 4 : i64}
// CHECK: %[[STEP:.*]] = memopt.increment
// CHECK: memopt.adamw_update %[[W]], %[[LOOP]]#2, {{.*}} step %[[STEP]]
// CHECK: memopt.adamw_update %[[B]], %[[LOOP]]#1, {{.*}} step %[[STEP]]
// CHECK: return %[[LOOP]]#0,

// -----

// A [B, T, C] activation reshaped to [B*T, C] keeps its leading batch
// dimension; a mean-squared error is scaled by one over the full batch's
// element count.

func.func @forward(
    %x: tensor<4x2x3xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %t: tensor<4x2x3xf32> {memopt.role = "label", memopt.name = "t", memopt.batch_dim = 0 : i64},
    %s: tensor<3xf32> {memopt.role = "param", memopt.name = "s"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.broadcast %s dims [2] : tensor<3xf32> to tensor<4x2x3xf32>
  %1 = memopt.mul %x, %0 : tensor<4x2x3xf32>
  %2 = memopt.reshape %1 : tensor<4x2x3xf32> to tensor<8x3xf32>
  %3 = memopt.reshape %t : tensor<4x2x3xf32> to tensor<8x3xf32>
  %loss = memopt.mse_loss %2, %3 : tensor<8x3xf32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK: scf.for
// CHECK:   memopt.reshape %{{.*}} : tensor<1x2x3xf32> to tensor<2x3xf32>
// CHECK:   %[[SUM:.*]] = memopt.mse_loss %{{.*}}, %{{.*}} reduction<sum> : tensor<2x3xf32>
// CHECK:   memopt.mul_scalar %[[SUM]], 0.041666666666666664
// CHECK:   memopt.mse_loss_grad
// CHECK-SAME: reduction<sum>
// CHECK: } {memopt.micro_batches = 4 : i64}

// -----

// A mean written out: the sum of the masked squares over the count of the
// labels that are not -100 (a sum over the batch of the labels alone). The
// count is hoisted: the mask, its 1 and 0 and their sum run on the full
// batch's labels before the loop, and in the loop each micro-batch's sum is
// divided by it (its backward's seed, one over it, is made before the
// loop), which adds up to the full batch's mean.

func.func @forward(
    %x: tensor<8x3xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %s: tensor<3xf32> {memopt.role = "param", memopt.name = "s"})
    -> tensor<f32> attributes {memopt.loss} {
  %ignore = memopt.constant dense<-100> : tensor<8xi64>
  %mask = memopt.compare ne, %y, %ignore : tensor<8xi64>
  %one = memopt.constant dense<1.0> : tensor<8xf32>
  %zero = memopt.constant dense<0.0> : tensor<8xf32>
  %weight = memopt.where %mask, %one, %zero : tensor<8xi1>, tensor<8xf32>
  %count = memopt.reduce_sum %weight dims [0] : tensor<8xf32> to tensor<f32>
  %0 = memopt.broadcast %s dims [1] : tensor<3xf32> to tensor<8x3xf32>
  %1 = memopt.mul %x, %0 : tensor<8x3xf32>
  %2 = memopt.mul %1, %1 : tensor<8x3xf32>
  %3 = memopt.reduce_sum %2 dims [1] : tensor<8x3xf32> to tensor<8xf32>
  %4 = memopt.mul %3, %weight : tensor<8xf32>
  %5 = memopt.reduce_sum %4 dims [0] : tensor<8xf32> to tensor<f32>
  %loss = memopt.div %5, %count : tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:arg0]]: tensor<8x3xf32> {{[^}]*}}}, %[[Y:arg1]]: tensor<8xi64>
// CHECK: %[[MASK:.*]] = memopt.compare ne, %[[Y]], %{{.*}} : tensor<8xi64>
// CHECK: %[[W:.*]] = memopt.where %[[MASK]], %{{.*}}, %{{.*}} : tensor<8xi1>, tensor<8xf32>
// CHECK: %[[COUNT:.*]] = memopt.reduce_sum %[[W]] dims [0] : tensor<8xf32> to tensor<f32>
// CHECK: %[[INV:.*]] = memopt.div %{{.*}}, %[[COUNT]] : tensor<f32>
// CHECK: scf.for
// CHECK:   %[[YS:.*]] = tensor.extract_slice %[[Y]][%{{.*}}] [2] [1] : tensor<8xi64> to tensor<2xi64>
// CHECK:   %[[MS:.*]] = memopt.compare ne, %[[YS]], %{{.*}} : tensor<2xi64>
// CHECK:   %[[WS:.*]] = memopt.where %[[MS]], %{{.*}}, %{{.*}} : tensor<2xi1>, tensor<2xf32>
// CHECK:   %[[SUM:.*]] = memopt.reduce_sum %{{.*}} dims [0] : tensor<2xf32> to tensor<f32>
// CHECK:   memopt.div %[[SUM]], %[[COUNT]] : tensor<f32>
// CHECK:   %[[SEED:.*]] = memopt.broadcast %[[INV]] dims [] : tensor<f32> to tensor<2xf32>
// CHECK:   memopt.mul %[[SEED]], %[[WS]] : tensor<2xf32>
// CHECK: } {memopt.micro_batches = 4 : i64}
