// RUN: memopt-opt %s -split-input-file --memopt-mixed-precision -verify-diagnostics
// RUN: not memopt-opt %s -split-input-file --memopt-mixed-precision="compute-type=f8" 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not memopt-opt %s -split-input-file --memopt-mixed-precision="loss-scale=big" 2>&1 | FileCheck %s --check-prefix=SCALE
// RUN: not memopt-opt %s -split-input-file --memopt-mixed-precision="loss-scale=-2" 2>&1 | FileCheck %s --check-prefix=SCALE-NEG
// RUN: not memopt-opt %s -split-input-file --memopt-mixed-precision="compute-type=fp16 backoff-factor=1.5" 2>&1 | FileCheck %s --check-prefix=BACKOFF
// RUN: not memopt-opt %s -split-input-file --memopt-mixed-precision="compute-type=fp16 growth-interval=0" 2>&1 | FileCheck %s --check-prefix=INTERVAL
// RUN: not memopt-opt %s -split-input-file --memopt-mixed-precision="compute-type=fp16 growth-factor=1" 2>&1 | FileCheck %s --check-prefix=GROWTH

// TYPE: for the --compute-type option: unknown value 'f8' (expected none, bf16 or fp16)
// SCALE: error: --memopt-mixed-precision option 'loss-scale' is 'big', expected dynamic, none or a positive number
// SCALE-NEG: error: --memopt-mixed-precision option 'loss-scale' is '-2', expected dynamic, none or a positive number
// BACKOFF: error: --memopt-mixed-precision option 'backoff-factor' is 1.5, expected a number in (0, 1)
// INTERVAL: error: --memopt-mixed-precision option 'growth-interval' is 0, expected an integer >= 1
// GROWTH: error: --memopt-mixed-precision option 'growth-factor' is 1, expected a number > 1

// expected-error @+1 {{--memopt-mixed-precision expects exactly one function marked memopt.loss, found 0}}
module {
  func.func @plain(%w: tensor<4xf32>) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

func.func @bad_precision(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss} {
  // expected-error @+1 {{'memopt.relu' op attribute 'memopt.precision' must be "f32", "bf16" or "f16", got "fp8"}}
  %r = memopt.relu %w {memopt.precision = "fp8"} : tensor<4xf32>
  %l = memopt.reduce_sum %r dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op attribute 'memopt.loss_scale' needs growth_interval, an integer >= 1}}
func.func @bad_scale(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss, memopt.loss_scale = {mode = "dynamic", scale = 8.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64}} {
  %l = memopt.reduce_sum %w dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op attribute 'memopt.loss_scale' needs mode = "dynamic" or "static"}}
func.func @bad_mode(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss, memopt.loss_scale = {mode = "auto", scale = 8.0 : f64}} {
  %l = memopt.reduce_sum %w dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'func.func' op attribute 'memopt.loss_scale' needs scale, a float > 0}}
func.func @bad_static(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss, memopt.loss_scale = {mode = "static", scale = 0.0 : f64}} {
  %l = memopt.reduce_sum %w dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}
