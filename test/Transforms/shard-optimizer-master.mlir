// RUN: memopt-opt %s --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-accumulate="data-parallel=2" --memopt-shard-optimizer=stage=1 | FileCheck %s

// ZeRO over 2 ranks in BF16. The step reads the weight only through its
// bf16 copy, so the weight is held as that copy (a new "param_copy"
// argument of its name) and its f32 master weights become a shard of 6
// elements like the AdamW moments. The layer norm's weight and bias are read
// in f32 (the norm runs in f32): they stay whole. The update's new master slice
// is cast to bf16 and all-gathered into the copy, returned after the
// optimizer step; the master's new slice is returned as the master.

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %g: tensor<4xf32> {memopt.role = "param", memopt.name = "ln.weight"},
    %c: tensor<4xf32> {memopt.role = "param", memopt.name = "ln.bias"},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "fc.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %n, %mean, %rstd = memopt.layer_norm %x, %g, %c eps 1.0e-05 {memopt.scope = "ln"} : tensor<8x4xf32>, tensor<4xf32> -> tensor<8xf32>
  %0 = memopt.matmul %n, %w transpose_rhs {memopt.scope = "fc"} : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %loss = memopt.cross_entropy %0, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[G:arg2]]: tensor<4xf32> {memopt.name = "ln.weight", memopt.role = "param"}
// CHECK-SAME: tensor<4xf32> {memopt.name = "ln.bias", memopt.role = "param"}
// CHECK-SAME: %[[MASTER:arg4]]: tensor<6xf32> {memopt.name = "fc.weight", memopt.role = "param", memopt.shard_of = array<i64: 3, 4>}
// CHECK-SAME: %[[STEP:arg[0-9]+]]: tensor<i64> {memopt.name = "optimizer.step", memopt.role = "optim"}
// CHECK-SAME: %[[COPY:arg[0-9]+]]: tensor<3x4xbf16> {memopt.name = "fc.weight", memopt.role = "param_copy"})
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<6xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<6xf32>, tensor<6xf32>, tensor<i64>, tensor<3x4xbf16>)
// CHECK-NOT: memopt.cast %[[MASTER]]
// CHECK: memopt.matmul %{{.*}}, %[[COPY]] transpose_rhs
// CHECK-NOT: memopt.cast %[[MASTER]]
// CHECK-NOT: shard.all_slice %[[MASTER]]
// CHECK: %[[NEWW:.*]], %[[NEWM:.*]], %[[NEWV:.*]] = memopt.adamw_update %[[MASTER]], %{{.*}} : tensor<6xf32>
// CHECK: %[[LOW:.*]] = memopt.cast %[[NEWW]] {{.*}} : tensor<6xf32> to tensor<6xbf16>
// CHECK: %[[GATHERED:.*]] = shard.all_gather %[[LOW]] on @memopt_ranks grid_axes = [0] gather_axis = 0 {{.*}} : tensor<6xbf16> -> tensor<12xbf16>
// CHECK: %[[NEWCOPY:.*]] = memopt.reshape %[[GATHERED]] {{.*}} : tensor<12xbf16> to tensor<3x4xbf16>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[NEWW]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NEWM]], %[[NEWV]], %{{.*}}, %[[NEWCOPY]] :
