// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate="micro-batches=2 data-parallel=2" -verify-diagnostics

// A mean written out divides by a sum over the batch of the labels alone.
// With one rank --memopt-accumulate makes that sum on the full batch before
// the loop (accumulate.mlir); a rank holds only its share of the batch, so
// under data parallelism the division is refused, with the op named.

func.func @forward(
    %x: tensor<8x3xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %s: tensor<3xf32> {memopt.role = "param", memopt.name = "s"})
    -> tensor<f32> attributes {memopt.loss} {
  %ignore = memopt.constant dense<-100> : tensor<8xi64>
  %mask = memopt.compare ne, %y, %ignore : tensor<8xi64>
  %one = memopt.constant dense<1.0> : tensor<8xf32>
  %zero = memopt.constant dense<0.0> : tensor<8xf32>
  %weight = memopt.where %mask, %one, %zero : tensor<8xi1>, tensor<8xf32>
  %count = memopt.reduce_sum %weight dims [0] : tensor<8xf32> to tensor<f32>
  %0 = memopt.broadcast %s dims [1] : tensor<3xf32> to tensor<8x3xf32>
  %1 = memopt.mul %x, %0 : tensor<8x3xf32>
  %2 = memopt.reduce_sum %1 dims [1] : tensor<8x3xf32> to tensor<8xf32>
  %3 = memopt.mul %2, %weight : tensor<8xf32>
  %4 = memopt.reduce_sum %3 dims [0] : tensor<8xf32> to tensor<f32>
  // expected-error @+1 {{'memopt.div' op cannot be split into 2 micro-batches: it is not linear in a value summed over the batch (a loss or a gradient)}}
  %loss = memopt.div %4, %count : tensor<f32>
  return %loss : tensor<f32>
}
