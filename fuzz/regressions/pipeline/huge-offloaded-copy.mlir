
func.func @forward(%x: tensor<3037000499x3037000499xf32> {memopt.role = "param", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.reduce_sum %x dims [0] : tensor<3037000499x3037000499xf32> to tensor<3037000499xf32>
  %1 = memopt.reduce_sum %0 dims [0] : tensor<3037000499xf32> to tensor<f32>
  return %1 : tensor<f32>
}	