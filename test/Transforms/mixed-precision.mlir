// RUN: memopt-opt %s -split-input-file --memopt-mixed-precision | FileCheck %s
// RUN: memopt-opt %s -split-input-file --memopt-mixed-precision="compute-type=fp16" | FileCheck %s --check-prefix=F16

// nn.Linear -> relu -> nn.Linear -> cross-entropy. The matmuls run in bf16
// with one cast of each master weight, the bias adds follow the products
// (the f32 biases are cast before their broadcast), relu keeps its input's
// dtype, and the loss casts the logits back to f32. Parameter arguments stay
// f32. Without loss scaling (the bf16 default) there is no memopt.loss_scale.

// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME: %[[Y:[^:]*]]: tensor<4xi64>
// CHECK-SAME: %[[W1:[^:]*]]: tensor<16x8xf32>
// CHECK-SAME: %[[B1:[^:]*]]: tensor<16xf32>
// CHECK-SAME: %[[W2:[^:]*]]: tensor<3x16xf32>
// CHECK-SAME: -> tensor<f32> attributes {memopt.loss} {
// CHECK-NEXT: %[[XL:.*]] = memopt.cast %[[X]] {memopt.scope = "fc1"} : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[W1L:.*]] = memopt.cast %[[W1]] {memopt.scope = "fc1"} : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK-NEXT: %[[H:.*]] = memopt.matmul %[[XL]], %[[W1L]] transpose_rhs {memopt.scope = "fc1"} : tensor<4x8xbf16>, tensor<16x8xbf16> -> tensor<4x16xbf16>
// CHECK-NEXT: %[[B1L:.*]] = memopt.cast %[[B1]] {memopt.scope = "fc1"} : tensor<16xf32> to tensor<16xbf16>
// CHECK-NEXT: %[[B1B:.*]] = memopt.broadcast %[[B1L]] dims [1] {memopt.scope = "fc1"} : tensor<16xbf16> to tensor<4x16xbf16>
// CHECK-NEXT: %[[A:.*]] = memopt.add %[[H]], %[[B1B]] {memopt.scope = "fc1"} : tensor<4x16xbf16>
// CHECK-NEXT: %[[R:.*]] = memopt.relu %[[A]] : tensor<4x16xbf16>
// CHECK-NEXT: %[[W2L:.*]] = memopt.cast %[[W2]] {memopt.scope = "fc2"} : tensor<3x16xf32> to tensor<3x16xbf16>
// CHECK-NEXT: %[[Z:.*]] = memopt.matmul %[[R]], %[[W2L]] transpose_rhs {memopt.scope = "fc2"} : tensor<4x16xbf16>, tensor<3x16xbf16> -> tensor<4x3xbf16>
// CHECK-NEXT: %[[Z32:.*]] = memopt.cast %[[Z]] : tensor<4x3xbf16> to tensor<4x3xf32>
// CHECK-NEXT: %[[L:.*]] = memopt.cross_entropy %[[Z32]], %[[Y]] : tensor<4x3xf32>, tensor<4xi64>
// CHECK-NEXT: return %[[L]] : tensor<f32>

// F16-LABEL: func.func @mlp
// F16-SAME: attributes {memopt.loss, memopt.loss_scale = {backoff_factor = 5.000000e-01 : f64, growth_factor = 2.000000e+00 : f64, growth_interval = 2000 : i64, mode = "dynamic", scale = 6.553600e+04 : f64}}
// F16: memopt.matmul {{.*}} -> tensor<4x16xf16>
func.func @mlp(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x"},
               %y: tensor<4xi64> {memopt.role = "label", memopt.name = "y"},
               %w1: tensor<16x8xf32> {memopt.role = "param", memopt.name = "fc1.weight"},
               %b1: tensor<16xf32> {memopt.role = "param", memopt.name = "fc1.bias"},
               %w2: tensor<3x16xf32> {memopt.role = "param", memopt.name = "fc2.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w1 transpose_rhs {memopt.scope = "fc1"} : tensor<4x8xf32>, tensor<16x8xf32> -> tensor<4x16xf32>
  %1 = memopt.broadcast %b1 dims [1] {memopt.scope = "fc1"} : tensor<16xf32> to tensor<4x16xf32>
  %2 = memopt.add %0, %1 {memopt.scope = "fc1"} : tensor<4x16xf32>
  %3 = memopt.relu %2 : tensor<4x16xf32>
  %4 = memopt.matmul %3, %w2 transpose_rhs {memopt.scope = "fc2"} : tensor<4x16xf32>, tensor<3x16xf32> -> tensor<4x3xf32>
  %l = memopt.cross_entropy %4, %y : tensor<4x3xf32>, tensor<4xi64>
  return %l : tensor<f32>
}

// -----

// A weight used by two matmuls is cast once. softmax and layer_norm run in
// f32; their statistics stay f32; the sum produces f32 from a bf16 input
// without a cast; an add of f32 data and bf16 data promotes to f32.

// CHECK-LABEL: func.func @policy
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<8x8xf32>
// CHECK-SAME: %[[G:[^:]*]]: tensor<8xf32>
// CHECK-SAME: %[[B:[^:]*]]: tensor<8xf32>
// CHECK-NEXT: %[[XL:.*]] = memopt.cast %[[X]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[WL:.*]] = memopt.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NEXT: %[[M1:.*]] = memopt.matmul %[[XL]], %[[WL]] : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[M2:.*]] = memopt.matmul %[[M1]], %[[WL]] : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[M32:.*]] = memopt.cast %[[M2]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = memopt.softmax %[[M32]] dim 1 : tensor<4x8xf32>
// CHECK-NEXT: %[[N:.*]], %{{.*}}, %{{.*}} = memopt.layer_norm %[[S]], %[[G]], %[[B]] eps 1.000000e-05 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[P:.*]] = memopt.add %[[N]], %[[M32]] : tensor<4x8xf32>
// CHECK-NEXT: %[[E:.*]] = memopt.exp %[[M32]] : tensor<4x8xf32>
// CHECK-NEXT: %[[Q:.*]] = memopt.mul %[[P]], %[[E]] : tensor<4x8xf32>
// CHECK-NEXT: %[[T:.*]] = memopt.reduce_sum %[[M2]] dims [0, 1] : tensor<4x8xbf16> to tensor<f32>
// CHECK-NEXT: %[[U:.*]] = memopt.reduce_mean %[[Q]] dims [0, 1] : tensor<4x8xf32> to tensor<f32>
// CHECK-NEXT: %[[L:.*]] = memopt.add %[[T]], %[[U]] : tensor<f32>
// CHECK-NEXT: return %[[L]]
func.func @policy(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x"},
                  %w: tensor<8x8xf32> {memopt.role = "param", memopt.name = "w"},
                  %g: tensor<8xf32> {memopt.role = "param", memopt.name = "g"},
                  %b: tensor<8xf32> {memopt.role = "param", memopt.name = "b"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %1 = memopt.matmul %0, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %2 = memopt.softmax %1 dim 1 : tensor<4x8xf32>
  %3, %mean, %rstd = memopt.layer_norm %2, %g, %b eps 1.0e-05 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4xf32>
  %4 = memopt.add %3, %1 : tensor<4x8xf32>
  %5 = memopt.exp %1 : tensor<4x8xf32>
  %6 = memopt.mul %4, %5 : tensor<4x8xf32>
  %7 = memopt.reduce_sum %1 dims [0, 1] : tensor<4x8xf32> to tensor<f32>
  %8 = memopt.reduce_mean %6 dims [0, 1] : tensor<4x8xf32> to tensor<f32>
  %l = memopt.add %7, %8 : tensor<f32>
  return %l : tensor<f32>
}

// -----

// `memopt.precision` overrides the policy: an f32 matmul, a bf16 softmax.
// A bf16 -> f32 -> bf16 round trip folds away; a cast of a constant
// becomes a constant.

// CHECK-LABEL: func.func @override
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<8x8xf32>
// CHECK-NEXT: %[[M:.*]] = memopt.matmul %[[X]], %[[W]] {memopt.precision = "f32"} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[ML:.*]] = memopt.cast %[[M]] : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK-NEXT: %[[S:.*]] = memopt.softmax %[[ML]] dim 1 {memopt.precision = "bf16"} : tensor<4x8xbf16>
// CHECK-NEXT: %[[C:.*]] = memopt.constant dense<1.000000e+00> : tensor<4x8xbf16>
// CHECK-NEXT: %[[A:.*]] = memopt.add %[[S]], %[[C]] {memopt.precision = "bf16"} : tensor<4x8xbf16>
// CHECK-NEXT: %[[WL:.*]] = memopt.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xbf16>
// CHECK-NEXT: %[[N:.*]] = memopt.matmul %[[A]], %[[WL]] : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[N32:.*]] = memopt.cast %[[N]] : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[L:.*]] = memopt.reduce_sum %[[N32]] dims [0, 1] {memopt.precision = "f32"} : tensor<4x8xf32> to tensor<f32>
// CHECK-NEXT: return %[[L]]
func.func @override(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x"},
                    %w: tensor<8x8xf32> {memopt.role = "param", memopt.name = "w"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w {memopt.precision = "f32"} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %1 = memopt.softmax %0 dim 1 {memopt.precision = "bf16"} : tensor<4x8xf32>
  %c = memopt.constant dense<1.0> : tensor<4x8xf32>
  %2 = memopt.add %1, %c {memopt.precision = "bf16"} : tensor<4x8xf32>
  %3 = memopt.cast %2 : tensor<4x8xf32> to tensor<4x8xf32>
  %4 = memopt.matmul %3, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %l = memopt.reduce_sum %4 dims [0, 1] {memopt.precision = "f32"} : tensor<4x8xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Explicit casts in the input: f32 -> bf16 -> f32 is lossy and stays;
// bf16 -> f32 -> bf16 folds to nothing.

// CHECK-LABEL: func.func @user_casts
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32>
// CHECK-NEXT: %[[A:.*]] = memopt.cast %[[X]] : tensor<4xf32> to tensor<4xbf16>
// CHECK-NEXT: %[[B:.*]] = memopt.cast %[[A]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[E:.*]] = memopt.exp %[[B]] : tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = memopt.relu %[[A]] : tensor<4xbf16>
// CHECK-NEXT: %[[R32:.*]] = memopt.cast %[[R]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = memopt.add %[[E]], %[[R32]] : tensor<4xf32>
func.func @user_casts(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.cast %x : tensor<4xf32> to tensor<4xbf16>
  %1 = memopt.cast %0 : tensor<4xbf16> to tensor<4xf32>
  %2 = memopt.exp %1 : tensor<4xf32>
  %3 = memopt.cast %1 : tensor<4xf32> to tensor<4xbf16>
  %4 = memopt.relu %3 : tensor<4xbf16>
  %5 = memopt.cast %4 : tensor<4xbf16> to tensor<4xf32>
  %6 = memopt.add %2, %5 : tensor<4xf32>
  %l = memopt.reduce_sum %6 dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A float made an index and back is a truncation, never folded; an index
// cast to bf16 keeps its cast.

// CHECK-LABEL: func.func @index_casts
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32>
// CHECK-NEXT: %[[I:.*]] = memopt.cast %[[X]] : tensor<4xf32> to tensor<4xi64>
// CHECK-NEXT: %[[F:.*]] = memopt.cast %[[I]] : tensor<4xi64> to tensor<4xf32>
// CHECK-NEXT: %[[M:.*]] = memopt.mul %[[X]], %[[F]] : tensor<4xf32>
// CHECK-NEXT: %[[H:.*]] = memopt.cast %[[I]] : tensor<4xi64> to tensor<4xbf16>
func.func @index_casts(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.cast %x : tensor<4xf32> to tensor<4xi64>
  %1 = memopt.cast %0 : tensor<4xi64> to tensor<4xf32>
  %2 = memopt.mul %x, %1 : tensor<4xf32>
  %3 = memopt.cast %0 : tensor<4xi64> to tensor<4xbf16>
  %4 = memopt.cast %3 : tensor<4xbf16> to tensor<4xf32>
  %5 = memopt.add %2, %4 : tensor<4xf32>
  %l = memopt.reduce_sum %5 dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}
