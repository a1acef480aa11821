// RUN: memopt-opt %s --split-input-file --memopt-quantize-frozen | FileCheck %s
// RUN: memopt-opt %s --split-input-file --memopt-quantize-frozen --memopt-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: memopt-opt %s --split-input-file --memopt-mixed-precision=compute-type=bf16 --memopt-quantize-frozen | FileCheck %s --check-prefix=BF16

// A frozen matrix read only as the right-hand operand of products becomes
// its NF4 bytes (560 elements: 280 bytes of codes, 9 block codes, 3 bytes of
// padding, one group scale and the offset: 300 bytes), and each product a
// memopt.nf4_matmul in its orientation. A frozen matrix another op reads,
// a frozen vector and a trained weight keep their types.
// CHECK-LABEL: func.func @lora
// CHECK-SAME: %[[W:[^:]*]]: tensor<300xi8> {memopt.name = "base.weight", memopt.nf4_of = array<i64: 8, 70>, memopt.role = "frozen"}
// CHECK-SAME: %[[E:[^:]*]]: tensor<2x8xf32> {memopt.name = "other.weight", memopt.role = "frozen"}
// CHECK-SAME: %{{[^:]*}}: tensor<8xf32> {memopt.name = "base.bias", memopt.role = "frozen"}
// CHECK-SAME: %[[A:[^:]*]]: tensor<70x70xf32> {memopt.name = "adapter.weight", memopt.role = "param"}
// CHECK: %[[H:.*]] = memopt.matmul %{{[^,]*}}, %[[A]] transpose_rhs
// CHECK: %[[Y:.*]] = memopt.nf4_matmul %[[H]], %[[W]] shape [8, 70] transpose_rhs : tensor<2x70xf32>, tensor<300xi8> -> tensor<2x8xf32>
// CHECK: memopt.nf4_matmul %[[Y]], %[[W]] shape [8, 70] : tensor<2x8xf32>, tensor<300xi8> -> tensor<2x70xf32>
// CHECK: memopt.add %[[Y]], %[[E]]
// CHECK-NOT: memopt.matmul {{.*}}%[[W]]

// The input gradient of each product (after the forward's two) is the
// other orientation of the same bytes; the frozen weight gets no gradient
// and no update.
// GRAD-LABEL: func.func @train_step
// GRAD-SAME: %[[W:[^:]*]]: tensor<300xi8> {memopt.name = "base.weight", memopt.nf4_of = array<i64: 8, 70>, memopt.role = "frozen"}
// GRAD: memopt.nf4_matmul %{{.*}}, %[[W]] shape [8, 70] transpose_rhs : tensor<2x70xf32>
// GRAD: memopt.nf4_matmul %{{.*}}, %[[W]] shape [8, 70] : tensor<2x8xf32>
// GRAD-DAG: memopt.nf4_matmul %{{.*}}, %[[W]] shape [8, 70] transpose_rhs : tensor<2x70xf32>
// GRAD-DAG: memopt.nf4_matmul %{{.*}}, %[[W]] shape [8, 70] : tensor<2x8xf32>
// GRAD-NOT: memopt.matmul {{.*}}%[[W]]
// GRAD: memopt.adamw_update
// GRAD-NOT: memopt.adamw_update

// Under BF16 the products run in bf16 from the NF4 bytes: no bf16 copy of
// the weight, no cast of it.
// BF16-LABEL: func.func @lora
// BF16-SAME: %[[W:[^:]*]]: tensor<300xi8> {memopt.name = "base.weight", memopt.nf4_of = array<i64: 8, 70>, memopt.role = "frozen"}
// BF16-NOT: memopt.cast %[[W]]
// BF16: memopt.nf4_matmul %{{.*}}, %[[W]] shape [8, 70] transpose_rhs : tensor<2x70xbf16>, tensor<300xi8> -> tensor<2x8xbf16>
func.func @lora(%x: tensor<2x70xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                %w: tensor<8x70xf32> {memopt.role = "frozen", memopt.name = "base.weight"},
                %e: tensor<2x8xf32> {memopt.role = "frozen", memopt.name = "other.weight"},
                %b: tensor<8xf32> {memopt.role = "frozen", memopt.name = "base.bias"},
                %a: tensor<70x70xf32> {memopt.role = "param", memopt.name = "adapter.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %h = memopt.matmul %x, %a transpose_rhs : tensor<2x70xf32>, tensor<70x70xf32> -> tensor<2x70xf32>
  %y = memopt.matmul %h, %w transpose_rhs : tensor<2x70xf32>, tensor<8x70xf32> -> tensor<2x8xf32>
  %back = memopt.matmul %y, %w : tensor<2x8xf32>, tensor<8x70xf32> -> tensor<2x70xf32>
  %u = memopt.add %y, %e : tensor<2x8xf32>
  %bb = memopt.broadcast %b dims [1] : tensor<8xf32> to tensor<2x8xf32>
  %o = memopt.add %u, %bb : tensor<2x8xf32>
  %s1 = memopt.reduce_sum %o dims [0, 1] : tensor<2x8xf32> to tensor<f32>
  %s2 = memopt.reduce_sum %back dims [0, 1] : tensor<2x70xf32> to tensor<f32>
  %s = memopt.add %s1, %s2 : tensor<f32>
  return %s : tensor<f32>
}

// -----

// A frozen LM head that the fused loss reads becomes NF4 too ([10, 8]: 40
// bytes of codes, 2 block codes, 2 of padding, a scale and the offset), and
// the loss memopt.nf4_linear_cross_entropy; its gradient has none for the
// weight, only for x and the bias.
// CHECK-LABEL: func.func @head
// CHECK-SAME: %[[W:[^:]*]]: tensor<52xi8> {memopt.name = "head.weight", memopt.nf4_of = array<i64: 10, 8>, memopt.role = "frozen"}
// CHECK: memopt.nf4_linear_cross_entropy %{{.*}}, %[[W]] shape [10, 8], %{{.*}} bias %{{.*}} chunk 4 ignore_index 0 : tensor<4x8xf32>, tensor<52xi8>, tensor<4xi64>, tensor<10xf32> -> tensor<4xf32>
// CHECK-NOT: memopt.linear_cross_entropy

// GRAD-LABEL: func.func @train_step
// GRAD: %{{.*}}, %[[LSE:.*]] = memopt.nf4_linear_cross_entropy
// GRAD: %{{.*}}, %{{.*}} = memopt.nf4_linear_cross_entropy_grad %{{.*}}, %{{.*}} shape [10, 8], %{{.*}}, %[[LSE]], %{{.*}} bias %{{.*}} chunk 4 ignore_index 0 : tensor<4x8xf32>, tensor<52xi8>, tensor<4xi64>, tensor<4xf32>, tensor<10xf32> -> tensor<4x8xf32>, tensor<10xf32>
// GRAD: memopt.adamw_update
// GRAD: memopt.adamw_update
// GRAD-NOT: memopt.adamw_update

// Under BF16 the loss's products run in bf16 from the NF4 bytes.
// BF16-LABEL: func.func @head
// BF16-NOT: memopt.cast %{{.*}} : tensor<10x8xf32>
// BF16: memopt.nf4_linear_cross_entropy %{{.*}}, %{{.*}} shape [10, 8], %{{.*}} bias %{{.*}} chunk 4 ignore_index 0 : tensor<4x8xbf16>, tensor<52xi8>, tensor<4xi64>, tensor<10xbf16> -> tensor<4xf32>
func.func @head(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                %a: tensor<8x8xf32> {memopt.role = "param", memopt.name = "adapter.weight"},
                %w: tensor<10x8xf32> {memopt.role = "frozen", memopt.name = "head.weight"},
                %b: tensor<10xf32> {memopt.role = "param", memopt.name = "head.bias"},
                %t: tensor<4xi64> {memopt.role = "label", memopt.name = "t", memopt.batch_dim = 0 : i64}) -> tensor<f32> attributes {memopt.loss} {
  %h = memopt.matmul %x, %a transpose_rhs : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %l, %lse = memopt.linear_cross_entropy %h, %w, %t bias %b chunk 4 ignore_index 0 : tensor<4x8xf32>, tensor<10x8xf32>, tensor<4xi64>, tensor<10xf32> -> tensor<4xf32>
  return %l : tensor<f32>
}
