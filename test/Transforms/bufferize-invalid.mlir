// RUN: memopt-opt %s --memopt-bufferize -split-input-file -verify-diagnostics

// expected-error @+1 {{no function marked 'memopt.train_step' to bufferize (run --memopt-autodiff first)}}
module {
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

func.func @train_step(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.train_step} {
  // expected-error @+1 {{'arith.constant' op cannot be bufferized: --memopt-bufferize handles memopt tensor ops (and shard collectives) only}}
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @train_step(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.train_step} {
  // expected-error @+1 {{'scf.execute_region' op cannot be bufferized: --memopt-bufferize handles memopt tensor ops (and shard collectives) only}}
  %l = scf.execute_region -> tensor<f32> {
    %s = memopt.reduce_sum %x dims [0] : tensor<4xf32> to tensor<f32>
    scf.yield %s : tensor<f32>
  }
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op must return the loss ('tensor<f32>') and then the new value of each of its 1 param, state, optim and param_copy arguments, got 1 result}}
func.func @train_step(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"})
    -> tensor<f32> attributes {memopt.train_step} {
  %s = memopt.reduce_sum %w dims [0] : tensor<4xf32> to tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @train_step(%p: tensor<4xf32> {memopt.role = "param", memopt.name = "p"},
                      %q: tensor<4xf32> {memopt.role = "param", memopt.name = "q"})
    -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>) attributes {memopt.train_step} {
  %s = memopt.reduce_sum %p dims [0] : tensor<4xf32> to tensor<f32>
  // expected-error @+1 {{'func.return' op returns argument #1 as the new value of argument #0 while argument #1 is itself updated; --memopt-bufferize cannot order these copies}}
  return %s, %q, %p : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{'func.func' op argument #0 must be a statically shaped tensor, got 'tensor<?xf32>'}}
func.func @train_step(%x: tensor<?xf32> {memopt.role = "input", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.train_step} {
  %c = memopt.constant dense<1.0> : tensor<f32>
  return %c : tensor<f32>
}
