// RUN: memopt-opt %s --memopt-autodiff --memopt-clip-gradients="max-norm=0.5" | FileCheck %s --check-prefix=KEEP
// RUN: memopt-opt %s --memopt-autodiff --memopt-clip-gradients="max-norm=0.5 strategy=recompute" --memopt-release-gradients | FileCheck %s --check-prefix=RECOMPUTE
// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" --memopt-shard-optimizer=stage=2 --memopt-clip-gradients="max-norm=0.5" | FileCheck %s --check-prefix=ZERO

// --memopt-clip-gradients: clip_grad_norm_(parameters, 0.5) before the
// updates. Each gradient's sum of squares is taken where the gradient is
// made; the norm is the root of their f32 sum, the coefficient
// min(1, (1 / (norm + 1e-6)) * 0.5) as PyTorch's tensors compute it; every
// update reads its gradient times the coefficient, and the norm is the new
// value of the appended optim argument optimizer.grad_norm.

// KEEP-LABEL: func.func @train_step
// KEEP-SAME: %[[NORMARG:[^:]*]]: tensor<f32> {memopt.name = "optimizer.grad_norm", memopt.role = "optim"})
// KEEP-SAME: -> ({{.*}}, tensor<i64>, tensor<f32>)
// KEEP: %[[DB:.*]] = memopt.reduce_sum %{{.*}} dims [0] {memopt.scope = "fc"}
// KEEP-NEXT: %[[SB:.*]] = memopt.reduce_sum_squares %[[DB]] dims [0] : tensor<3xf32> to tensor<f32>
// KEEP-NEXT: %[[DW:.*]] = memopt.matmul {{.*}} transpose_lhs
// KEEP-NEXT: %[[SW:.*]] = memopt.reduce_sum_squares %[[DW]] dims [0, 1] : tensor<3x4xf32> to tensor<f32>
// KEEP-NEXT: %[[TOTAL:.*]] = memopt.add %[[SW]], %[[SB]] : tensor<f32>
// KEEP-NEXT: %[[NORM:.*]] = memopt.sqrt %[[TOTAL]]
// KEEP-NEXT: %[[SHIFT:.*]] = memopt.add_scalar %[[NORM]], 9.99{{.*}}E-7
// KEEP-NEXT: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// KEEP-NEXT: %[[INV:.*]] = memopt.div %[[ONE]], %[[SHIFT]]
// KEEP-NEXT: %[[RAW:.*]] = memopt.mul_scalar %[[INV]], 5.000000e-01
// KEEP-NEXT: %[[COEF:.*]] = memopt.clamp %[[RAW]] max 1.000000e+00
// KEEP-NEXT: %[[CB:.*]] = memopt.scale_by %[[DB]], %[[COEF]] : tensor<3xf32>
// KEEP-NEXT: %[[CW:.*]] = memopt.scale_by %[[DW]], %[[COEF]] : tensor<3x4xf32>
// KEEP: memopt.adamw_update %arg2, %[[CW]],
// KEEP: memopt.adamw_update %arg3, %[[CB]],
// KEEP: return {{.*}}, %[[NORM]] :

// Strategy recompute: the backward is cloned after the last forward value
// it reads, each clone reduced to its squares; the original backward then
// follows, and release runs each update right after its gradient.
// RECOMPUTE-LABEL: func.func @train_step
// RECOMPUTE: %[[LOGITS:.*]] = memopt.add %{{.*}}, %{{.*}} {memopt.scope = "fc"}
// RECOMPUTE-NEXT: memopt.constant
// RECOMPUTE-NEXT: %[[DY1:.*]] = memopt.cross_entropy_grad %[[LOGITS]]
// RECOMPUTE-NEXT: %[[DB1:.*]] = memopt.reduce_sum %[[DY1]]
// RECOMPUTE-NEXT: memopt.reduce_sum_squares %[[DB1]]
// RECOMPUTE-NEXT: %[[DW1:.*]] = memopt.matmul %[[DY1]]
// RECOMPUTE-NEXT: memopt.reduce_sum_squares %[[DW1]]
// RECOMPUTE: %[[NORM:.*]] = memopt.sqrt
// RECOMPUTE: %[[COEF:.*]] = memopt.clamp
// RECOMPUTE-NEXT: %[[LOSS:.*]] = memopt.cross_entropy %[[LOGITS]]
// RECOMPUTE: %[[DY:.*]] = memopt.cross_entropy_grad %[[LOGITS]]
// RECOMPUTE-NEXT: %[[DB:.*]] = memopt.reduce_sum %[[DY]]
// RECOMPUTE-NEXT: %[[CB:.*]] = memopt.scale_by %[[DB]], %[[COEF]]
// RECOMPUTE-NEXT: %[[STEP:.*]] = memopt.increment
// RECOMPUTE-NEXT: memopt.adamw_update %arg3, %[[CB]]
// RECOMPUTE-NEXT: %[[DW:.*]] = memopt.matmul %[[DY]]
// RECOMPUTE-NEXT: %[[CW:.*]] = memopt.scale_by %[[DW]], %[[COEF]]
// RECOMPUTE-NEXT: memopt.adamw_update %arg2, %[[CW]]
// RECOMPUTE: return %[[LOSS]], {{.*}}, %[[NORM]] :

// ZeRO-2 over 2 ranks: each rank's gradient shards give partial sums of
// squares, added over the ranks before the root.
// ZERO-LABEL: func.func @train_step
// ZERO: %[[S1:.*]] = memopt.reduce_sum_squares %{{.*}} dims [0] : tensor<2xf32> to tensor<f32>
// ZERO-NEXT: %[[S2:.*]] = memopt.reduce_sum_squares %{{.*}} dims [0] : tensor<6xf32> to tensor<f32>
// ZERO-NEXT: %[[PART:.*]] = memopt.add %[[S2]], %[[S1]]
// ZERO-NEXT: %[[TOTAL:.*]] = shard.all_reduce %[[PART]] on @memopt_ranks grid_axes = [0] : tensor<f32> -> tensor<f32>
// ZERO-NEXT: memopt.sqrt %[[TOTAL]]

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
