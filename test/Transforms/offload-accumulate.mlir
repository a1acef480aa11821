// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate=micro-batches=2 --memopt-clip-gradients=max-norm=1 --memopt-offload-optimizer | FileCheck %s
// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate=micro-batches=2 --memopt-clip-gradients=max-norm=1 --memopt-offload-optimizer --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan | FileCheck %s --check-prefix=PLAN
// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-offload-optimizer | FileCheck %s --check-prefix=DP

// Optimizer offload accumulates the gradients on the host: each sum starts
// from a zero made on the host, every micro-batch's term is copied down as
// it completes and added there, and clipping's sums of squares and rescale
// read the sums on the host; only the norm's scalars cross.

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
// CHECK-DAG: %[[ZW:.*]] = memopt.constant dense<0.000000e+00> : tensor<3x4xf32> {memopt.on_host}
// CHECK-DAG: %[[ZB:.*]] = memopt.constant dense<0.000000e+00> : tensor<3xf32> {memopt.on_host}
// CHECK: %[[SUMS:.*]]:3 = scf.for {{.*}} iter_args(%[[LOSS:.*]] = %{{.*}}, %[[SB:.*]] = %[[ZB]], %[[SW:.*]] = %[[ZW]])
// CHECK:   %[[DB:.*]] = memopt.reduce_sum
// CHECK:   %[[HB:.*]] = memopt.transfer %[[DB]] to host
// CHECK:   %[[NB:.*]] = memopt.add %[[SB]], %[[HB]] {memopt.on_host
// CHECK:   %[[DW:.*]] = memopt.matmul
// CHECK:   %[[HW:.*]] = memopt.transfer %[[DW]] to host
// CHECK:   %[[NW:.*]] = memopt.add %[[SW]], %[[HW]] {memopt.on_host
// CHECK:   scf.yield %{{.*}}, %[[NB]], %[[NW]]
// CHECK: %[[QB:.*]] = memopt.reduce_sum_squares %[[SUMS]]#1 dims [0] {memopt.on_host}
// CHECK: memopt.transfer %[[QB]] to device : tensor<f32>
// CHECK: %[[QW:.*]] = memopt.reduce_sum_squares %[[SUMS]]#2 dims [0, 1] {memopt.on_host}
// CHECK: memopt.transfer %[[QW]] to device : tensor<f32>
// CHECK: %[[COEF:.*]] = memopt.clamp
// CHECK: %[[HCOEF:.*]] = memopt.transfer %[[COEF]] to host : tensor<f32>
// CHECK: %[[CB:.*]] = memopt.scale_by %[[SUMS]]#1, %[[HCOEF]] {memopt.on_host}
// CHECK: %[[CW:.*]] = memopt.scale_by %[[SUMS]]#2, %[[HCOEF]] {memopt.on_host}
// CHECK-NOT: memopt.transfer %[[SUMS]]
// CHECK: memopt.adamw_update %{{.*}}, %[[CW]], {{.*}} {memopt.on_host
// CHECK: memopt.adamw_update %{{.*}}, %[[CB]], {{.*}} {memopt.on_host

// The sums live in the host arena for the whole loop; the plan verifier
// checks that every kernel reads and writes its own memory.
// PLAN-LABEL: func.func @train_step
// PLAN-DAG: %[[ZW:.*]] = memref.alloc() {memopt.memory = "host", memopt.offset = {{[0-9]+}} : i64} : memref<3x4xf32>
// PLAN-DAG: %[[ZB:.*]] = memref.alloc() {memopt.memory = "host", memopt.offset = {{[0-9]+}} : i64} : memref<3xf32>
// PLAN: scf.for
// PLAN: memopt.kernel "memopt.add" ins(%[[ZB]], %{{.*}} : memref<3xf32>, memref<3xf32>) outs(%[[ZB]] : memref<3xf32>) with {} {memopt.on_host
// PLAN: memopt.kernel "memopt.add" ins(%[[ZW]], %{{.*}} : memref<3x4xf32>, memref<3x4xf32>) outs(%[[ZW]] : memref<3x4xf32>) with {} {memopt.on_host
// PLAN: memopt.kernel "memopt.reduce_sum_squares" ins(%[[ZB]] : memref<3xf32>)
// PLAN-SAME: {memopt.on_host}

// Data parallelism without ZeRO sums the ranks' gradients on the device
// after the loop: those sums stay there, and only the update's inputs
// cross.
// DP-LABEL: func.func @train_step
// DP-NOT: memopt.add {{.*}}memopt.on_host
// DP: %[[R:.*]] = shard.all_reduce %{{.*}}#2
// DP: memopt.transfer %[[R]] to host
