// RUN: not memopt-opt %s --memopt-autodiff --memopt-shard-optimizer 2>&1 | FileCheck %s --check-prefix=NO-GRID
// RUN: not memopt-opt %s --memopt-autodiff --memopt-accumulate=data-parallel=2 --memopt-shard-optimizer=stage=4 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not memopt-opt %s --memopt-mixed-precision=compute-type=fp16 --memopt-autodiff --memopt-accumulate=data-parallel=2 --memopt-shard-optimizer 2>&1 | FileCheck %s --check-prefix=SKIP

// NO-GRID: error: --memopt-shard-optimizer needs a data-parallel step over at least 2 ranks (--memopt-accumulate with data-parallel=N, which declares shard.grid @memopt_ranks)
// STAGE: error: --memopt-shard-optimizer option 'stage' is 4, expected 1, 2 or 3
// SKIP: error: 'memopt.adamw_update' op of 'fc.weight' cannot be sharded: ZeRO updates f32 parameters whose gradient is the ranks' sum of an accumulator (FP16 dynamic loss scaling skips steps on every rank's overflow check: use bf16)

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "fc.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w transpose_rhs : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %loss = memopt.cross_entropy %0, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}
