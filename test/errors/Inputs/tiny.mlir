// The model of train.test: loss = sum(x * broadcast(w)), with an input
// x: f32 [2, 3] and a parameter w: f32 [3].
func.func @forward(%x: tensor<2x3xf32> {memopt.role = "input", memopt.name = "x"},
                   %w: tensor<3xf32> {memopt.role = "param", memopt.name = "w"})
    -> tensor<f32> attributes {memopt.loss} {
  %b = memopt.broadcast %w dims [1] : tensor<3xf32> to tensor<2x3xf32>
  %m = memopt.mul %x, %b : tensor<2x3xf32>
  %0 = memopt.reduce_sum %m dims [0, 1] : tensor<2x3xf32> to tensor<f32>
  return %0 : tensor<f32>
}
