func.func @not_differentiable(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss} {
  %d = memopt.tanh_grad %w, %w : tensor<4xf32>
  %m = memopt.reduce_sum %d dims [0] : tensor<4xf32> to tensor<f32>
  return %m : tensor<f32>
}
