// An 8-layer MLP whose activations (4096 x 1024 f32, 16 MiB each) dwarf its
// weights (4 MiB each): what remat recomputes, or activation offload moves to
// the host and back (budget-offload.test). Compiled with --report-only.
func.func @forward(
    %x: tensor<4096x1024xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<4096xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w0: tensor<1024x1024xf32> {memopt.role = "param", memopt.name = "layers.0.weight"},
    %w1: tensor<1024x1024xf32> {memopt.role = "param", memopt.name = "layers.1.weight"},
    %w2: tensor<1024x1024xf32> {memopt.role = "param", memopt.name = "layers.2.weight"},
    %w3: tensor<1024x1024xf32> {memopt.role = "param", memopt.name = "layers.3.weight"},
    %w4: tensor<1024x1024xf32> {memopt.role = "param", memopt.name = "layers.4.weight"},
    %w5: tensor<1024x1024xf32> {memopt.role = "param", memopt.name = "layers.5.weight"},
    %w6: tensor<1024x1024xf32> {memopt.role = "param", memopt.name = "layers.6.weight"},
    %w7: tensor<1024x1024xf32> {memopt.role = "param", memopt.name = "layers.7.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %h0 = memopt.matmul %x, %w0 transpose_rhs {memopt.scope = "layers.0"} : tensor<4096x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
  %a0 = memopt.gelu %h0 {memopt.scope = "layers.0"} : tensor<4096x1024xf32>
  %h1 = memopt.matmul %a0, %w1 transpose_rhs {memopt.scope = "layers.1"} : tensor<4096x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
  %a1 = memopt.gelu %h1 {memopt.scope = "layers.1"} : tensor<4096x1024xf32>
  %h2 = memopt.matmul %a1, %w2 transpose_rhs {memopt.scope = "layers.2"} : tensor<4096x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
  %a2 = memopt.gelu %h2 {memopt.scope = "layers.2"} : tensor<4096x1024xf32>
  %h3 = memopt.matmul %a2, %w3 transpose_rhs {memopt.scope = "layers.3"} : tensor<4096x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
  %a3 = memopt.gelu %h3 {memopt.scope = "layers.3"} : tensor<4096x1024xf32>
  %h4 = memopt.matmul %a3, %w4 transpose_rhs {memopt.scope = "layers.4"} : tensor<4096x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
  %a4 = memopt.gelu %h4 {memopt.scope = "layers.4"} : tensor<4096x1024xf32>
  %h5 = memopt.matmul %a4, %w5 transpose_rhs {memopt.scope = "layers.5"} : tensor<4096x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
  %a5 = memopt.gelu %h5 {memopt.scope = "layers.5"} : tensor<4096x1024xf32>
  %h6 = memopt.matmul %a5, %w6 transpose_rhs {memopt.scope = "layers.6"} : tensor<4096x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
  %a6 = memopt.gelu %h6 {memopt.scope = "layers.6"} : tensor<4096x1024xf32>
  %h7 = memopt.matmul %a6, %w7 transpose_rhs {memopt.scope = "layers.7"} : tensor<4096x1024xf32>, tensor<1024x1024xf32> -> tensor<4096x1024xf32>
  %a7 = memopt.gelu %h7 {memopt.scope = "layers.7"} : tensor<4096x1024xf32>
  %loss = memopt.cross_entropy %a7, %y : tensor<4096x1024xf32>, tensor<4096xi64>
  return %loss : tensor<f32>
}
