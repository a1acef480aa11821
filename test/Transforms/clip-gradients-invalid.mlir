// RUN: not memopt-opt %s --memopt-autodiff --memopt-clip-gradients="max-norm=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not memopt-opt %s --memopt-autodiff --memopt-clip-gradients="strategy=later" 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not memopt-opt %s --memopt-mixed-precision="compute-type=fp16" --memopt-autodiff --memopt-clip-gradients="strategy=recompute" 2>&1 | FileCheck %s --check-prefix=SCALED
// RUN: not memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2" --memopt-clip-gradients="strategy=recompute" 2>&1 | FileCheck %s --check-prefix=LOOP
// RUN: not memopt-opt %s --memopt-autodiff --memopt-release-gradients --memopt-clip-gradients 2>&1 | FileCheck %s --check-prefix=RELEASED

// ZERO: error: 'func.func' op cannot clip the gradients to a norm of 0: the largest norm must be a positive number
// STRATEGY: error: 'func.func' op unknown clipping strategy 'later' (expected keep or recompute)
// SCALED: error: 'func.func' op cannot recompute the backward for clipping: the step skips updates under loss scaling, so its updates wait for every gradient anyway (use strategy keep)
// LOOP: error: 'func.func' op cannot recompute the backward for clipping: the step accumulates micro-batches or ranks, so its updates wait for every gradient anyway (use strategy keep)
// RELEASED: error: 'memopt.adamw_update' op runs before the last gradient: clip the gradients before releasing them

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "fc.weight"},
    %b: tensor<3xf32> {memopt.role = "param", memopt.name = "fc.bias"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w transpose_rhs : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %1 = memopt.broadcast %b dims [1] : tensor<3xf32> to tensor<8x3xf32>
  %2 = memopt.add %0, %1 : tensor<8x3xf32>
  %loss = memopt.cross_entropy %2, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}
