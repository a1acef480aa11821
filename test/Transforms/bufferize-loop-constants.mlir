// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate=micro-batches=2 --memopt-bufferize | FileCheck %s

// A constant outside the micro-batch loop (where folding hoists it) that the
// loop reads is made again right before each reader inside the loop: its
// buffer then lives around that reader, not to the loop's end (the
// backward's seed of 1, scaled by 1 / the label count). The 1 that the
// count's inverse reads before the loop stays there.

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "fc.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w transpose_rhs {memopt.scope = "fc"} : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %loss = memopt.cross_entropy %0, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK: memopt.kernel "memopt.constant" outs(%[[ONE:.*]] : memref<f32>) with {value = dense<1.000000e+00> : tensor<f32>}
// CHECK: memopt.kernel "memopt.div" ins(%[[ONE]], %{{.*}} : memref<f32>, memref<f32>) outs(%[[INV:.*]] : memref<f32>)
// CHECK: scf.for
// CHECK: memopt.kernel "memopt.cross_entropy"
// CHECK: %[[SEED:.*]] = memref.alloc() : memref<f32>
// CHECK-NEXT: memopt.kernel "memopt.constant" outs(%[[SEED]] : memref<f32>) with {value = dense<1.000000e+00> : tensor<f32>}
// CHECK-NEXT: memopt.kernel "memopt.mul" ins(%[[SEED]], %[[INV]] : memref<f32>, memref<f32>)
// CHECK: memopt.kernel "memopt.cross_entropy_grad" ins(%{{.*}}, %{{.*}}, %[[SEED]] :
