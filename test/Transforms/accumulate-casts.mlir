// RUN: memopt-opt %s --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-accumulate=micro-batches=2 | FileCheck %s

// A parameter's bf16 copy that only the micro-batch loop reads is made in
// the loop, where the matmul reads it: made before the loop, every copy of
// every parameter would live across all of it. The bias's copy is read by a
// broadcast that the loop rebuilds at the micro-batch shape from outside,
// so it stays before the loop.

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
// CHECK-SAME: %[[W:arg2]]: tensor<3x4xf32>
// CHECK-SAME: %[[B:arg3]]: tensor<3xf32>
// CHECK: memopt.cast %[[B]] {{.*}} : tensor<3xf32> to tensor<3xbf16>
// CHECK-NOT: memopt.cast %[[W]]
// CHECK: scf.for
// CHECK: %[[WB:.*]] = memopt.cast %[[W]] {{.*}} : tensor<3x4xf32> to tensor<3x4xbf16>
// CHECK-NEXT: memopt.matmul %{{.*}}, %[[WB]] transpose_rhs
// CHECK: scf.yield
