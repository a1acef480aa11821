// RUN: memopt-opt %s --memopt-mixed-precision="compute-type=bf16" | FileCheck %s

// A frozen weight that the step reads only through its bf16 copy is stored
// in bf16 (no f32 copy, no cast); one an f32 op also reads (the layer norm's
// weight) stays f32, and a trained parameter keeps its f32 master.
// CHECK-LABEL: func.func @frozen
// CHECK-SAME: %[[W:[^:]*]]: tensor<8x4xbf16> {memopt.name = "fc.weight", memopt.role = "frozen"}
// CHECK-SAME: %{{[^:]*}}: tensor<8xf32> {memopt.name = "ln.weight", memopt.role = "frozen"}
// CHECK-SAME: %[[H:[^:]*]]: tensor<3x8xf32> {memopt.name = "head.weight", memopt.role = "param"}
// CHECK-NOT: memopt.cast %[[W]]
// CHECK: memopt.matmul %{{.*}}, %[[W]] transpose_rhs {{.*}}: tensor<2x4xbf16>, tensor<8x4xbf16> -> tensor<2x8xbf16>
// CHECK: memopt.cast %[[H]] : tensor<3x8xf32> to tensor<3x8xbf16>
func.func @frozen(%x: tensor<2x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                  %w: tensor<8x4xf32> {memopt.role = "frozen", memopt.name = "fc.weight"},
                  %g: tensor<8xf32> {memopt.role = "frozen", memopt.name = "ln.weight"},
                  %b: tensor<8xf32> {memopt.role = "frozen", memopt.name = "ln.bias"},
                  %h: tensor<3x8xf32> {memopt.role = "param", memopt.name = "head.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %x, %w transpose_rhs : tensor<2x4xf32>, tensor<8x4xf32> -> tensor<2x8xf32>
  %n, %mean, %rstd = memopt.layer_norm %y, %g, %b eps 1.0e-05 : tensor<2x8xf32>, tensor<8xf32> -> tensor<2xf32>
  %z = memopt.matmul %n, %h transpose_rhs : tensor<2x8xf32>, tensor<3x8xf32> -> tensor<2x3xf32>
  %s = memopt.reduce_sum %z dims [0, 1] : tensor<2x3xf32> to tensor<f32>
  return %s : tensor<f32>
}
