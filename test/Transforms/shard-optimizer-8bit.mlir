// RUN: memopt-opt %s --memopt-autodiff="state-bits=8" --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-shard-optimizer=stage=2 | FileCheck %s

// ZeRO over 2 ranks with 8-bit moments. The weight's 4100 elements would
// be 2 slices of 2050; its 8-bit moments are cut in whole blocks of 256, so
// each rank owns 9 blocks, 2304 elements (the weight padded to 4608), and
// each moment's shard is those blocks' records: 9 x 260 bytes of the whole
// tensor's 17 x 260. The bias keeps f32 moments, sliced as usual (41
// elements: 2 slices of 21).

func.func @forward(
    %x: tensor<8x100xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<41x100xf32> {memopt.role = "param", memopt.name = "fc.weight"},
    %b: tensor<41xf32> {memopt.role = "param", memopt.name = "fc.bias"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w transpose_rhs : tensor<8x100xf32>, tensor<41x100xf32> -> tensor<8x41xf32>
  %1 = memopt.broadcast %b dims [1] : tensor<41xf32> to tensor<8x41xf32>
  %2 = memopt.add %0, %1 : tensor<8x41xf32>
  %loss = memopt.cross_entropy %2, %y : tensor<8x41xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:arg2]]: tensor<41x100xf32> {memopt.name = "fc.weight", memopt.role = "param"}
// CHECK-SAME: %[[M:arg4]]: tensor<2340xi8> {memopt.name = "optimizer.fc.weight.exp_avg", memopt.role = "optim", memopt.shard_of = array<i64: 4420>}
// CHECK-SAME: %[[V:arg5]]: tensor<2340xi8> {{.*}}memopt.shard_of = array<i64: 4420>}
// CHECK-SAME: %{{arg6}}: tensor<21xf32> {{.*}}memopt.shard_of = array<i64: 41>}
// CHECK: %[[SW:.*]] = shard.reduce_scatter %{{.*}} : tensor<4608xf32> -> tensor<2304xf32>
// CHECK: %[[PADW:.*]] = memopt.slice_grad %{{.*}} starts [0] limits [4100] strides [1] : tensor<4100xf32> to tensor<4608xf32>
// CHECK: %[[WSLICE:.*]] = shard.all_slice %[[PADW]] {{.*}} : tensor<4608xf32> -> tensor<2304xf32>
// CHECK: %[[NEWW:.*]], %[[NEWM:.*]], %[[NEWV:.*]] = memopt.adamw_update %[[WSLICE]], %{{.*}}, %[[M]], %[[V]] {{.*}} : tensor<2304xf32> state tensor<2340xi8>
// CHECK: shard.all_gather %[[NEWW]] {{.*}} : tensor<2304xf32> -> tensor<4608xf32>
// CHECK: return {{.*}}%[[NEWM]], %[[NEWV]]
