// RUN: memopt-opt %s --memopt-bufferize | FileCheck %s

// A buffer summed over the ranks twice in a row is not a run of distinct
// accumulators: both sums stay in place on it, with no flat buffer.

// CHECK-LABEL: func.func @train_step
// CHECK:     %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK:     memopt.kernel "shard.all_reduce" ins(%[[A]] : memref<4xf32>) outs(%[[A]] : memref<4xf32>)
// CHECK-NEXT: memopt.kernel "shard.all_reduce" ins(%[[A]] : memref<4xf32>) outs(%[[A]] : memref<4xf32>)
// CHECK-NOT: memref.view
module {
  shard.grid @memopt_ranks(shape = 2)
  func.func @train_step(%p: tensor<4xf32> {memopt.role = "param", memopt.name = "p"}) -> (tensor<f32>, tensor<4xf32>) attributes {memopt.train_step} {
    %l = memopt.reduce_sum %p dims [0] : tensor<4xf32> to tensor<f32>
    %a = memopt.exp %p : tensor<4xf32>
    %b = shard.all_reduce %a on @memopt_ranks grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %c = shard.all_reduce %b on @memopt_ranks grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %d = memopt.exp %c : tensor<4xf32>
    return %l, %d : tensor<f32>, tensor<4xf32>
  }
}
