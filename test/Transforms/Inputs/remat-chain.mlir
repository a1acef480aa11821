// A chain of four layers, h = tanh(x W^T) * (x W^T), and a cross-entropy
// loss: each layer's backward reads its matmul and tanh results, so the
// remat strategies have internals to recompute. Used by remat-*.mlir.
func.func @forward(
    %x: tensor<8x16xf32> {memopt.role = "input", memopt.name = "x"},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y"},
    %w0: tensor<16x16xf32> {memopt.role = "param", memopt.name = "layers.0.weight"},
    %w1: tensor<16x16xf32> {memopt.role = "param", memopt.name = "layers.1.weight"},
    %w2: tensor<16x16xf32> {memopt.role = "param", memopt.name = "layers.2.weight"},
    %w3: tensor<16x16xf32> {memopt.role = "param", memopt.name = "layers.3.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %m0 = memopt.matmul %x, %w0 transpose_rhs {memopt.scope = "layers.0"} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %a0 = memopt.tanh %m0 {memopt.scope = "layers.0"} : tensor<8x16xf32>
  %h0 = memopt.mul %a0, %m0 {memopt.scope = "layers.0"} : tensor<8x16xf32>
  %m1 = memopt.matmul %h0, %w1 transpose_rhs {memopt.scope = "layers.1"} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %a1 = memopt.tanh %m1 {memopt.scope = "layers.1"} : tensor<8x16xf32>
  %h1 = memopt.mul %a1, %m1 {memopt.scope = "layers.1"} : tensor<8x16xf32>
  %m2 = memopt.matmul %h1, %w2 transpose_rhs {memopt.scope = "layers.2"} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %a2 = memopt.tanh %m2 {memopt.scope = "layers.2"} : tensor<8x16xf32>
  %h2 = memopt.mul %a2, %m2 {memopt.scope = "layers.2"} : tensor<8x16xf32>
  %m3 = memopt.matmul %h2, %w3 transpose_rhs {memopt.scope = "layers.3"} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %a3 = memopt.tanh %m3 {memopt.scope = "layers.3"} : tensor<8x16xf32>
  %h3 = memopt.mul %a3, %m3 {memopt.scope = "layers.3"} : tensor<8x16xf32>
  %loss = memopt.cross_entropy %h3, %y {memopt.scope = ""} : tensor<8x16xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}
