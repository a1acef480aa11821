// Two parallel branches joined at the loss, each two steps of
// h = tanh(h) * h after a matmul, all in one top-level module ("net"): the
// forward has one stage, so only the general-graph search can recompute one
// branch and keep the other. Used by remat-branches.mlir.
func.func @forward(
    %x: tensor<256x16xf32> {memopt.role = "input", memopt.name = "x"},
    %y: tensor<256xi64> {memopt.role = "label", memopt.name = "y"},
    %wa: tensor<16x16xf32> {memopt.role = "param", memopt.name = "net.a.weight"},
    %wb: tensor<16x16xf32> {memopt.role = "param", memopt.name = "net.b.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %a1 = memopt.matmul %x, %wa transpose_rhs {memopt.scope = "net.a"} : tensor<256x16xf32>, tensor<16x16xf32> -> tensor<256x16xf32>
  %a2 = memopt.tanh %a1 {memopt.scope = "net.a"} : tensor<256x16xf32>
  %a3 = memopt.mul %a2, %a1 {memopt.scope = "net.a"} : tensor<256x16xf32>
  %a4 = memopt.tanh %a3 {memopt.scope = "net.a"} : tensor<256x16xf32>
  %a5 = memopt.mul %a4, %a3 {memopt.scope = "net.a"} : tensor<256x16xf32>
  %b1 = memopt.matmul %x, %wb transpose_rhs {memopt.scope = "net.b"} : tensor<256x16xf32>, tensor<16x16xf32> -> tensor<256x16xf32>
  %b2 = memopt.tanh %b1 {memopt.scope = "net.b"} : tensor<256x16xf32>
  %b3 = memopt.mul %b2, %b1 {memopt.scope = "net.b"} : tensor<256x16xf32>
  %b4 = memopt.tanh %b3 {memopt.scope = "net.b"} : tensor<256x16xf32>
  %b5 = memopt.mul %b4, %b3 {memopt.scope = "net.b"} : tensor<256x16xf32>
  %s = memopt.add %a5, %b5 {memopt.scope = "net"} : tensor<256x16xf32>
  %loss = memopt.cross_entropy %s, %y {memopt.scope = "net"} : tensor<256x16xf32>, tensor<256xi64>
  return %loss : tensor<f32>
}
