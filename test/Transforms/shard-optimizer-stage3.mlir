// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-shard-optimizer=stage=3 | FileCheck %s
// RUN: memopt-opt %s --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-accumulate=data-parallel=2 --memopt-shard-optimizer=stage=3 | FileCheck %s --check-prefix=BF16

// ZeRO stage 3 over 2 ranks. Each weight argument is the rank's slice
// (fc1: 20 elements, slices of 10; fc2: 15, padded to 16, slices of 8),
// marked with its full shape. Every op that reads a weight reads a copy
// gathered right before it: fc2.weight is read by the forward matmul and
// again by the backward's input-gradient matmul, so it is gathered twice
// in each micro-batch. The gradients are scattered as stage 2 does, the
// update writes the new slice and the step returns it: no gather after the
// update.

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w1: tensor<5x4xf32> {memopt.role = "param", memopt.name = "fc1.weight"},
    %w2: tensor<3x5xf32> {memopt.role = "param", memopt.name = "fc2.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w1 transpose_rhs {memopt.scope = "fc1"} : tensor<8x4xf32>, tensor<5x4xf32> -> tensor<8x5xf32>
  %1 = memopt.relu %0 {memopt.scope = "act"} : tensor<8x5xf32>
  %2 = memopt.matmul %1, %w2 transpose_rhs {memopt.scope = "fc2"} : tensor<8x5xf32>, tensor<3x5xf32> -> tensor<8x3xf32>
  %loss = memopt.cross_entropy %2, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W1:arg2]]: tensor<10xf32> {memopt.name = "fc1.weight", memopt.role = "param", memopt.shard_of = array<i64: 5, 4>}
// CHECK-SAME: %[[W2:arg3]]: tensor<8xf32> {memopt.name = "fc2.weight", memopt.role = "param", memopt.shard_of = array<i64: 3, 5>}
// CHECK-SAME: -> (tensor<f32>, tensor<10xf32>, tensor<8xf32>,
// CHECK: scf.for
// CHECK: %[[G1:.*]] = shard.all_gather %[[W1]] on @memopt_ranks grid_axes = [0] gather_axis = 0 {{.*}} : tensor<10xf32> -> tensor<20xf32>
// CHECK: %[[WHOLE1:.*]] = memopt.reshape %[[G1]] {{.*}} : tensor<20xf32> to tensor<5x4xf32>
// CHECK: %[[H:.*]] = memopt.matmul %{{.*}}, %[[WHOLE1]] transpose_rhs
// CHECK: %[[A:.*]] = memopt.relu %[[H]]
// CHECK: %[[G2:.*]] = shard.all_gather %[[W2]] {{.*}} : tensor<8xf32> -> tensor<16xf32>
// CHECK: %[[CUT2:.*]] = memopt.slice %[[G2]] starts [0] limits [15] strides [1] {{.*}} : tensor<16xf32> to tensor<15xf32>
// CHECK: %[[WHOLE2:.*]] = memopt.reshape %[[CUT2]] {{.*}} : tensor<15xf32> to tensor<3x5xf32>
// CHECK: memopt.matmul %[[A]], %[[WHOLE2]] transpose_rhs
// CHECK: %[[DY:.*]] = memopt.cross_entropy_grad
// CHECK: %[[AGAIN:.*]] = shard.all_gather %[[W2]] {{.*}} : tensor<8xf32> -> tensor<16xf32>
// CHECK: %[[CUT:.*]] = memopt.slice %[[AGAIN]] starts [0] limits [15]
// CHECK: %[[BACK:.*]] = memopt.reshape %[[CUT]] {{.*}} to tensor<3x5xf32>
// CHECK: memopt.matmul %[[DY]], %[[BACK]] {{{.*}}} : tensor<2x3xf32>, tensor<3x5xf32> -> tensor<2x5xf32>
// CHECK: shard.reduce_scatter %{{.*}} : tensor<16xf32> -> tensor<8xf32>
// CHECK: shard.reduce_scatter %{{.*}} : tensor<20xf32> -> tensor<10xf32>
// CHECK: scf.yield
// CHECK-NOT: shard.all_gather
// CHECK: %[[NEW1:.*]], %{{.*}}, %{{.*}} = memopt.adamw_update %[[W1]], %{{.*}} : tensor<10xf32>
// CHECK: %[[NEW2:.*]], %{{.*}}, %{{.*}} = memopt.adamw_update %[[W2]], %{{.*}} : tensor<8xf32>
// CHECK-NOT: shard.all_gather
// CHECK: return %{{.*}}, %[[NEW1]], %[[NEW2]],

// In BF16 no copy is held: each reader gathers the bf16 cast of the f32
// master's slice (half the bytes of an f32 gather).
// BF16-LABEL: func.func @train_step
// BF16-SAME: %[[W2:arg3]]: tensor<8xf32> {memopt.name = "fc2.weight", memopt.role = "param", memopt.shard_of = array<i64: 3, 5>}
// BF16-NOT: param_copy
// BF16: %[[LOW:.*]] = memopt.cast %[[W2]] {{.*}} : tensor<8xf32> to tensor<8xbf16>
// BF16: %[[G:.*]] = shard.all_gather %[[LOW]] {{.*}} : tensor<8xbf16> -> tensor<16xbf16>
// BF16: %[[CUT:.*]] = memopt.slice %[[G]] starts [0] limits [15] {{.*}} : tensor<16xbf16> to tensor<15xbf16>
// BF16: %[[WHOLE:.*]] = memopt.reshape %[[CUT]] {{.*}} : tensor<15xbf16> to tensor<3x5xbf16>
// BF16: memopt.matmul %{{.*}}, %[[WHOLE]] transpose_rhs {{.*}} : tensor<4x5xbf16>, tensor<3x5xbf16> -> tensor<4x3xbf16>
// BF16: %[[LOW2:.*]] = memopt.cast %[[W2]] {{.*}} : tensor<8xf32> to tensor<8xbf16>
// BF16: shard.all_gather %[[LOW2]] {{.*}} : tensor<8xbf16> -> tensor<16xbf16>
