// A random graph (bench/differential/randgraph.py 271) where the blocks plan
// needs the placement's exact search to reach its arena of 9984 B: its
// heuristics give 10240 B. remat-budget-exact.test plans it.
func.func @forward(
    %x0: tensor<8x4xi64> {memopt.role = "input", memopt.name = "x0", memopt.batch_dim = 0 : i64},
    %p0: tensor<15x9xf32> {memopt.role = "param", memopt.name = "p0"},
    %p1: tensor<4x9xf32> {memopt.role = "param", memopt.name = "p1"},
    %p2: tensor<5x9xf32> {memopt.role = "param", memopt.name = "p2"},
    %p3: tensor<4x5xf32> {memopt.role = "param", memopt.name = "p3"},
    %p4: tensor<5x5xf32> {memopt.role = "param", memopt.name = "p4"},
    %p5: tensor<4x5xf32> {memopt.role = "param", memopt.name = "p5"},
    %p6: tensor<7x5xf32> {memopt.role = "param", memopt.name = "p6"},
    %p7: tensor<4x7xf32> {memopt.role = "param", memopt.name = "p7"},
    %p8: tensor<5xf32> {memopt.role = "param", memopt.name = "p8"},
    %p9: tensor<5xf32> {memopt.role = "param", memopt.name = "p9"},
    %p10: tensor<4x9xf32> {memopt.role = "param", memopt.name = "p10"},
    %p11: tensor<4x4xf32> {memopt.role = "param", memopt.name = "p11"},
    %y1: tensor<8x4xi64> {memopt.role = "label", memopt.name = "y1", memopt.batch_dim = 0 : i64})
    -> tensor<f32> attributes {memopt.loss} {
  %v1 = memopt.embedding %p0, %x0 {memopt.scope = "embed"} : tensor<15x9xf32>, tensor<8x4xi64> -> tensor<8x4x9xf32>
  %v2 = memopt.broadcast %p1 dims [1, 2] {memopt.scope = "block.0"} : tensor<4x9xf32> to tensor<8x4x9xf32>
  %v3 = memopt.add %v1, %v2 {memopt.scope = "block.0"} : tensor<8x4x9xf32>
  %v4 = memopt.matmul %v3, %p2 transpose_rhs {memopt.scope = "block.0"} : tensor<8x4x9xf32>, tensor<5x9xf32> -> tensor<8x4x5xf32>
  %v5 = memopt.broadcast %p3 dims [1, 2] {memopt.scope = "block.0"} : tensor<4x5xf32> to tensor<8x4x5xf32>
  %v6 = memopt.add %v4, %v5 {memopt.scope = "block.0"} : tensor<8x4x5xf32>
  %v7 = memopt.matmul %v6, %p4 transpose_rhs {memopt.scope = "block.0"} : tensor<8x4x5xf32>, tensor<5x5xf32> -> tensor<8x4x5xf32>
  %v8 = memopt.broadcast %p5 dims [1, 2] {memopt.scope = "block.0"} : tensor<4x5xf32> to tensor<8x4x5xf32>
  %v9 = memopt.add %v7, %v8 {memopt.scope = "block.0"} : tensor<8x4x5xf32>
  %v10 = memopt.matmul %v9, %p6 transpose_rhs {memopt.scope = "block.0"} : tensor<8x4x5xf32>, tensor<7x5xf32> -> tensor<8x4x7xf32>
  %v11 = memopt.broadcast %p7 dims [1, 2] {memopt.scope = "block.0"} : tensor<4x7xf32> to tensor<8x4x7xf32>
  %v12 = memopt.add %v10, %v11 {memopt.scope = "block.0"} : tensor<8x4x7xf32>
  %v13, %v13_1, %v13_2 = memopt.layer_norm %v6, %p8, %p9 eps 1.0e-05 {memopt.scope = "block.0"} : tensor<8x4x5xf32>, tensor<5xf32> -> tensor<8x4xf32>
  %v14 = memopt.reshape %v13 {memopt.scope = "block.1"} : tensor<8x4x5xf32> to tensor<8x20xf32>
  %v15 = memopt.mul %v13, %v6 {memopt.scope = "block.1"} : tensor<8x4x5xf32>
  %v16 = memopt.sigmoid %v3 {memopt.scope = "block.1"} : tensor<8x4x9xf32>
  %v17 = memopt.add_scalar %v16, 5.000000e-01 {memopt.scope = "block.1"} : tensor<8x4x9xf32>
  %v18 = memopt.div %v1, %v17 {memopt.scope = "block.1"} : tensor<8x4x9xf32>
  %v19 = memopt.reduce_mean %v12 dims [1, 2] {memopt.scope = "head"} : tensor<8x4x7xf32> to tensor<8xf32>
  %v20 = memopt.broadcast %v19 dims [0] {memopt.scope = "head"} : tensor<8xf32> to tensor<8x4x9xf32>
  %v21 = memopt.add %v18, %v20 {memopt.scope = "head"} : tensor<8x4x9xf32>
  %v22 = memopt.reduce_mean %v14 dims [1] {memopt.scope = "head"} : tensor<8x20xf32> to tensor<8xf32>
  %v23 = memopt.broadcast %v22 dims [0] {memopt.scope = "head"} : tensor<8xf32> to tensor<8x4x9xf32>
  %v24 = memopt.add %v21, %v23 {memopt.scope = "head"} : tensor<8x4x9xf32>
  %v25 = memopt.reduce_mean %v15 dims [1, 2] {memopt.scope = "head"} : tensor<8x4x5xf32> to tensor<8xf32>
  %v26 = memopt.broadcast %v25 dims [0] {memopt.scope = "head"} : tensor<8xf32> to tensor<8x4x9xf32>
  %v27 = memopt.add %v24, %v26 {memopt.scope = "head"} : tensor<8x4x9xf32>
  %v28 = memopt.matmul %v27, %p10 transpose_rhs {memopt.scope = "head"} : tensor<8x4x9xf32>, tensor<4x9xf32> -> tensor<8x4x4xf32>
  %v29 = memopt.broadcast %p11 dims [1, 2] {memopt.scope = "head"} : tensor<4x4xf32> to tensor<8x4x4xf32>
  %v30 = memopt.add %v28, %v29 {memopt.scope = "head"} : tensor<8x4x4xf32>
  %v31 = memopt.cross_entropy %v30, %y1 ignore_index -100 {memopt.scope = "head"} : tensor<8x4x4xf32>, tensor<8x4xi64>
  return %v31 : tensor<f32>
}
