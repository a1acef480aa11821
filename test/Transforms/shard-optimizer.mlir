// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-shard-optimizer=stage=1 | FileCheck %s --check-prefixes=CHECK,STAGE1
// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-shard-optimizer=stage=2 | FileCheck %s --check-prefixes=CHECK,STAGE2
// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-shard-optimizer=stage=1 --memopt-bufferize | FileCheck %s --check-prefix=INPLACE

// After bufferization each update writes the new parameter slice over the
// slice it read (AdamW's InPlaceOpInterface: new_param over param), a
// scratch buffer that the all-gather then reads.
// INPLACE: memopt.kernel "memopt.adamw_update" ins(%[[WS:alloc_[0-9]+]], {{.*}}) outs(%[[WS]], %arg4, %arg5 :
// INPLACE: memopt.kernel "shard.all_gather" ins(%[[WS]] :
// INPLACE: memopt.kernel "memopt.adamw_update" ins(%[[BS:alloc_[0-9]+]], {{.*}}) outs(%[[BS]], %arg6, %arg7 :

// ZeRO over 2 ranks. The weight's 12 elements are 2 slices of 6; the bias's
// 3 are padded (slice_grad) to 4 and cut into 2 slices of 2. The AdamW
// moments are shards marked with the full shape; each update reads the
// rank's slice of its parameter and its gradient's reduce-scatter, and its
// new slices are all-gathered and unpadded into the parameter. Stage 1
// scatters the accumulators after the loop; stage 2 scatters each
// micro-batch's gradient in the loop and accumulates the slices.

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
// CHECK-SAME: %[[W:arg2]]: tensor<3x4xf32> {memopt.name = "fc.weight", memopt.role = "param"}
// CHECK-SAME: %[[B:arg3]]: tensor<3xf32>
// CHECK-SAME: %[[M:arg4]]: tensor<6xf32> {memopt.name = "optimizer.fc.weight.exp_avg", memopt.role = "optim", memopt.shard_of = array<i64: 3, 4>}
// CHECK-SAME: %[[V:arg5]]: tensor<6xf32> {{.*}}memopt.shard_of = array<i64: 3, 4>}
// CHECK-SAME: %[[BM:arg6]]: tensor<2xf32> {{.*}}memopt.shard_of = array<i64: 3>}
// CHECK-SAME: -> (tensor<f32>, tensor<3x4xf32>, tensor<3xf32>, tensor<6xf32>, tensor<6xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i64>)

// STAGE1: %[[LOOP:.*]]:3 = scf.for {{.*}} -> (tensor<f32>, tensor<3xf32>, tensor<3x4xf32>)
// STAGE1-NOT: shard.reduce_scatter
// STAGE1: scf.yield
// STAGE1: %[[FLAT:.*]] = memopt.reshape %[[LOOP]]#2 {{.*}} : tensor<3x4xf32> to tensor<12xf32>
// STAGE1: %[[GW:.*]] = shard.reduce_scatter %[[FLAT]] on @memopt_ranks grid_axes = [0] scatter_axis = 0 {{.*}} : tensor<12xf32> -> tensor<6xf32>

// STAGE2: %[[LOOP:.*]]:3 = scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[ACCB:.*]] = %{{.*}}, %[[ACCW:.*]] = %{{.*}}) -> (tensor<f32>, tensor<2xf32>, tensor<6xf32>)
// STAGE2: %[[PADB:.*]] = memopt.slice_grad %{{.*}} starts [0] limits [3] strides [1] {{.*}} : tensor<3xf32> to tensor<4xf32>
// STAGE2: %[[SB:.*]] = shard.reduce_scatter %[[PADB]] {{.*}} : tensor<4xf32> -> tensor<2xf32>
// STAGE2: memopt.add %[[ACCB]], %[[SB]] {{.*}} : tensor<2xf32>
// STAGE2: %[[SW:.*]] = shard.reduce_scatter %{{.*}} : tensor<12xf32> -> tensor<6xf32>
// STAGE2: memopt.add %[[ACCW]], %[[SW]] {{.*}} : tensor<6xf32>
// STAGE2: scf.yield
// STAGE2-NOT: shard.reduce_scatter

// CHECK: %[[WFLAT:.*]] = memopt.reshape %[[W]] {{.*}} : tensor<3x4xf32> to tensor<12xf32>
// CHECK: %[[WSLICE:.*]] = shard.all_slice %[[WFLAT]] on @memopt_ranks grid_axes = [0] slice_axis = 0 {{.*}} : tensor<12xf32> -> tensor<6xf32>
// STAGE1: %[[NEWW:.*]], %[[NEWM:.*]], %{{.*}} = memopt.adamw_update %[[WSLICE]], %[[GW]], %[[M]], %[[V]] {{.*}} : tensor<6xf32>
// STAGE2: %[[NEWW:.*]], %[[NEWM:.*]], %{{.*}} = memopt.adamw_update %[[WSLICE]], %[[LOOP]]#2, %[[M]], %[[V]] {{.*}} : tensor<6xf32>
// CHECK: %[[GATHERED:.*]] = shard.all_gather %[[NEWW]] on @memopt_ranks grid_axes = [0] gather_axis = 0 {{.*}} : tensor<6xf32> -> tensor<12xf32>
// CHECK: %[[WHOLE:.*]] = memopt.reshape %[[GATHERED]] {{.*}} : tensor<12xf32> to tensor<3x4xf32>
// STAGE1: %[[PADG:.*]] = memopt.slice_grad %[[LOOP]]#1 starts [0] limits [3] strides [1] {{.*}} : tensor<3xf32> to tensor<4xf32>
// STAGE1: %[[GB:.*]] = shard.reduce_scatter %[[PADG]] {{.*}} : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[PADP:.*]] = memopt.slice_grad %[[B]] starts [0] limits [3] strides [1] {{.*}} : tensor<3xf32> to tensor<4xf32>
// CHECK: %[[BSLICE:.*]] = shard.all_slice %[[PADP]] {{.*}} : tensor<4xf32> -> tensor<2xf32>
// STAGE1: %[[NEWB:.*]], %{{.*}}, %{{.*}} = memopt.adamw_update %[[BSLICE]], %[[GB]], %[[BM]], %{{.*}} : tensor<2xf32>
// STAGE2: %[[NEWB:.*]], %{{.*}}, %{{.*}} = memopt.adamw_update %[[BSLICE]], %[[LOOP]]#1, %[[BM]], %{{.*}} : tensor<2xf32>
// CHECK: %[[BG:.*]] = shard.all_gather %[[NEWB]] {{.*}} : tensor<2xf32> -> tensor<4xf32>
// CHECK: %[[BWHOLE:.*]] = memopt.slice %[[BG]] starts [0] limits [3] strides [1] {{.*}} : tensor<4xf32> to tensor<3xf32>
// CHECK: return %{{.*}}, %[[WHOLE]], %[[BWHOLE]], %[[NEWM]],
