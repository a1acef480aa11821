// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate=micro-batches=3 -split-input-file -verify-diagnostics

// expected-error @+1 {{argument 'x' has a batch of 8 along dimension 0, which micro-batches=3 does not divide}}
func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.broadcast %w dims [1] : tensor<4xf32> to tensor<8x4xf32>
  %1 = memopt.mul %x, %0 : tensor<8x4xf32>
  %2 = memopt.reduce_sum %1 dims [0, 1] : tensor<8x4xf32> to tensor<f32>
  return %2 : tensor<f32>
}

// -----

func.func @forward(
    %x: tensor<6x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"})
    -> tensor<f32> attributes {memopt.loss} {
  // expected-error @+1 {{'memopt.reduce_max' op cannot be split into 3 micro-batches: a maximum over the batch is not a sum over micro-batches}}
  %0 = memopt.reduce_max %x dims [0] : tensor<6x4xf32> to tensor<4xf32>
  %1 = memopt.mul %0, %w : tensor<4xf32>
  %3 = memopt.reduce_sum %1 dims [0] : tensor<4xf32> to tensor<f32>
  return %3 : tensor<f32>
}

// -----

func.func @forward(
    %x: tensor<6x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.broadcast %w dims [1] : tensor<4xf32> to tensor<6x4xf32>
  %1 = memopt.mul %x, %0 : tensor<6x4xf32>
  // expected-error @+1 {{'memopt.slice' op cannot be split into 3 micro-batches: it slices the batch dimension}}
  %2 = memopt.slice %1 starts [0, 0] limits [3, 4] strides [1, 1] : tensor<6x4xf32> to tensor<3x4xf32>
  %3 = memopt.reduce_sum %2 dims [0, 1] : tensor<3x4xf32> to tensor<f32>
  return %3 : tensor<f32>
}

// -----

func.func @forward(
    %x: tensor<6x2x2x2xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %w: tensor<2xf32> {memopt.role = "param", memopt.name = "bn.weight"},
    %b: tensor<2xf32> {memopt.role = "param", memopt.name = "bn.bias"},
    %rm: tensor<2xf32> {memopt.role = "state", memopt.name = "bn.running_mean"},
    %rv: tensor<2xf32> {memopt.role = "state", memopt.name = "bn.running_var"})
    -> (tensor<f32>, tensor<2xf32>, tensor<2xf32>) attributes {memopt.loss} {
  // expected-error @+1 {{'memopt.batch_norm' op computes its statistics over each micro-batch of 2 instead of the full batch of 6 (micro-batches=3), which changes the result; pass allow-batch-norm=true (memopt-compile --accumulate-allow-batch-norm) to accept per-micro-batch statistics}}
  %y, %mean, %rstd, %rm2, %rv2 = memopt.batch_norm %x, %w, %b, %rm, %rv eps 1.0e-05 momentum 1.0e-01 : tensor<6x2x2x2xf32>, tensor<2xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2, 3] : tensor<6x2x2x2xf32> to tensor<f32>
  return %l, %rm2, %rv2 : tensor<f32>, tensor<2xf32>, tensor<2xf32>
}
