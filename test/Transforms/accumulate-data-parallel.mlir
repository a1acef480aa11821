// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" | FileCheck %s
// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2 rank-batch=true" | FileCheck %s --check-prefix=RANK

// Data parallelism over 2 ranks, 2 micro-batches each: the batch arguments
// hold the rank's 4 of the 8 examples and the loop runs over micro-batches
// of 2; the label count is summed over the ranks before the loop (the mean
// is over the full batch's labels), the loss and each gradient after it,
// with upstream shard.all_reduce on the one-axis grid @memopt_ranks; the
// optimizer reads the sums.

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

// CHECK: shard.grid @memopt_ranks(shape = 2)
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:arg0]]: tensor<4x4xf32> {{[^}]*}}}, %[[Y:arg1]]: tensor<4xi64>
// CHECK: %[[COUNT:.*]] = memopt.label_count %[[Y]] : tensor<4xi64>
// CHECK: %[[TOTAL:.*]] = shard.all_reduce %[[COUNT]] on @memopt_ranks grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: memopt.div %{{.*}}, %[[TOTAL]] : tensor<f32>
// CHECK: %[[LOOP:.*]]:3 = scf.for
// CHECK:   tensor.extract_slice %[[X]][%{{.*}}, 0] [2, 4] [1, 1] : tensor<4x4xf32> to tensor<2x4xf32>
// CHECK:   memopt.cross_entropy %{{.*}} reduction<sum> : tensor<2x3xf32>, tensor<2xi64>
// CHECK: } {memopt.data_parallel = 2 : i64, memopt.micro_batches = 2 : i64}
// CHECK: %[[LOSS:.*]] = shard.all_reduce %[[LOOP]]#0 on @memopt_ranks grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[GB:.*]] = shard.all_reduce %[[LOOP]]#1 on @memopt_ranks grid_axes = [0] : tensor<3xf32> -> tensor<3xf32>
// CHECK: %[[GW:.*]] = shard.all_reduce %[[LOOP]]#2 on @memopt_ranks grid_axes = [0] : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK: memopt.adamw_update %{{.*}}, %[[GW]],
// CHECK: memopt.adamw_update %{{.*}}, %[[GB]],
// CHECK: return %[[LOSS]],

// With rank-batch the 8 examples are each rank's (16 over both ranks): the
// arguments keep their type, the loop cuts them into micro-batches of 4, and
// the sums over the ranks are the same.
// RANK-LABEL: func.func @train_step
// RANK-SAME: (%[[X:arg0]]: tensor<8x4xf32> {{[^}]*}}}, %[[Y:arg1]]: tensor<8xi64>
// RANK: %[[COUNT:.*]] = memopt.label_count %[[Y]] : tensor<8xi64>
// RANK: shard.all_reduce %[[COUNT]] on @memopt_ranks
// RANK: scf.for
// RANK:   tensor.extract_slice %[[X]][%{{.*}}, 0] [4, 4] [1, 1] : tensor<8x4xf32> to tensor<4x4xf32>
// RANK: } {memopt.data_parallel = 2 : i64, memopt.micro_batches = 2 : i64}
// RANK: shard.all_reduce %{{.*}}#2 on @memopt_ranks grid_axes = [0] : tensor<3x4xf32> -> tensor<3x4xf32>
