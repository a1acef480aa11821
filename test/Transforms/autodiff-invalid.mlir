// RUN: memopt-opt %s -split-input-file --memopt-autodiff -verify-diagnostics
// RUN: not memopt-opt %s --memopt-autodiff="optimizer=adam" 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// RUN: not memopt-opt %s --memopt-autodiff="beta2=1.5" 2>&1 | FileCheck %s --check-prefix=BETA

// OPTIMIZER: error: unknown optimizer 'adam' for --memopt-autodiff (expected adamw or sgd)
// BETA: error: --memopt-autodiff option 'beta2' is 1.5, expected in [0, 1)

func.func @not_differentiable(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss} {
  // A gradient op: memopt differentiates once.
  // expected-error @+1 {{'memopt.tanh_grad' is not differentiable, but the loss depends on it through a parameter}}
  %d = memopt.tanh_grad %w, %w : tensor<4xf32>
  %m = memopt.reduce_sum %d dims [0] : tensor<4xf32> to tensor<f32>
  return %m : tensor<f32>
}

// -----

// expected-error @+1 {{--memopt-autodiff expects exactly one function marked memopt.loss, found 0}}
module {
  func.func @plain(%w: tensor<4xf32>) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

func.func @statistics(%x: tensor<2x8xf32> {memopt.role = "param", memopt.name = "x"},
                      %w: tensor<8xf32> {memopt.role = "param", memopt.name = "w"},
                      %b: tensor<8xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  // expected-error @+1 {{'memopt.layer_norm' op cannot differentiate through its saved statistics (result #1): only the normalised result has a gradient}}
  %y, %m, %r = memopt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<2x8xf32>, tensor<8xf32> -> tensor<2xf32>
  %l = memopt.reduce_sum %m dims [0] : tensor<2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op parameter 'w': hyper-parameter 'beta2' is 1, expected in [0, 1)}}
func.func @bad_group_beta(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w", memopt.hparams = {beta2 = 1.0 : f64}}) -> tensor<f32> attributes {memopt.loss} {
  %s = memopt.reduce_sum %w dims [0] : tensor<4xf32> to tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op parameter 'w': 'memopt.hparams' entry 'momentum' is not a hyper-parameter of adamw with a float value (expected lr, weight_decay and beta1, beta2, eps)}}
func.func @sgd_option_under_adamw(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w", memopt.hparams = {momentum = 0.9 : f64}}) -> tensor<f32> attributes {memopt.loss} {
  %s = memopt.reduce_sum %w dims [0] : tensor<4xf32> to tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op was exported for the optimizer 'sgd' (memopt.optimizer), but the step is built for 'adamw'}}
func.func @other_optimizer(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss, memopt.optimizer = "sgd"} {
  %s = memopt.reduce_sum %w dims [0] : tensor<4xf32> to tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @scatter_padding(%g: tensor<3x2xf32> {memopt.role = "param", memopt.name = "g"}) -> tensor<f32> attributes {memopt.loss} {
  %i = memopt.constant dense<[0, 2, 2]> : tensor<3xi64>
  // expected-error @+1 {{'memopt.embedding_grad' op with 'padding_idx' has no gradient rule (its skipped rows would need a zero gradient)}}
  %t = memopt.embedding_grad %g, %i padding_idx 2 : tensor<3x2xf32>, tensor<3xi64> -> tensor<4x2xf32>
  %m = memopt.reduce_sum %t dims [0, 1] : tensor<4x2xf32> to tensor<f32>
  return %m : tensor<f32>
}
