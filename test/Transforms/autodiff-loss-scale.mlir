// RUN: memopt-opt %s -split-input-file --memopt-autodiff="optimizer=sgd lr=0.5 weight-decay=0" | FileCheck %s

// Dynamic loss scaling (docs/MixedPrecision.md): the scale and its growth
// tracker are optimizer state after the step counter; the backward starts
// from the scale; the parameters' gradients are unscaled and checked
// together; the updates and the increment are skipped on overflow; the
// scale is updated with GradScaler's semantics.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<8xf32>
// CHECK-SAME: %[[BUF:[^:]*]]: tensor<8xf32> {memopt.name = "optimizer.w.momentum_buffer", memopt.role = "optim"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {memopt.name = "optimizer.step", memopt.role = "optim"}
// CHECK-SAME: %[[SCALE:[^:]*]]: tensor<f32> {memopt.name = "optimizer.loss_scale", memopt.role = "optim"}
// CHECK-SAME: %[[TRACKER:[^:]*]]: tensor<i64> {memopt.name = "optimizer.growth_tracker", memopt.role = "optim"}
// CHECK-SAME: -> (tensor<f32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<i64>)
// CHECK-SAME: memopt.loss_scale = {{{.*}}mode = "dynamic"{{.*}}}
// CHECK: %[[WL:.*]] = memopt.cast %[[W]] : tensor<8xf32> to tensor<8xf16>
// CHECK: %[[LOSS:.*]] = memopt.reduce_sum
// CHECK-NOT: memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[SL:.*]] = memopt.cast %[[SCALE]] : tensor<f32> to tensor<f16>
// CHECK: memopt.broadcast %[[SL]]
// CHECK: %[[GL:.*]] = memopt.reduce_sum {{.*}} : tensor<4x8xf16> to tensor<8xf16>
// CHECK: %[[G:.*]] = memopt.cast %[[GL]] : tensor<8xf16> to tensor<8xf32>
// CHECK: %[[U:.*]], %[[INF:.*]] = memopt.unscale %[[SCALE]], %[[G]] : tensor<8xf32>
// CHECK: %[[STEP1:.*]] = memopt.increment %[[STEP]] skip_if %[[INF]]
// CHECK: %[[P:.*]], %[[B:.*]] = memopt.sgd_update %[[W]], %[[U]], %[[BUF]] skip_if %[[INF]]
// CHECK: %[[S:.*]], %[[T:.*]] = memopt.update_scale %[[SCALE]], %[[TRACKER]], %[[INF]] growth 2.000000e+00 backoff 5.000000e-01 interval 3
// CHECK: return %[[LOSS]], %[[P]], %[[B]], %[[STEP1]], %[[S]], %[[T]]
func.func @dynamic(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x"},
                   %w: tensor<8xf32> {memopt.role = "param", memopt.name = "w"})
    -> tensor<f32> attributes {memopt.loss, memopt.loss_scale = {mode = "dynamic", scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64, growth_interval = 3 : i64}} {
  %wl = memopt.cast %w : tensor<8xf32> to tensor<8xf16>
  %xl = memopt.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
  %b = memopt.broadcast %wl dims [1] : tensor<8xf16> to tensor<4x8xf16>
  %m = memopt.mul %xl, %b : tensor<4x8xf16>
  %l = memopt.reduce_sum %m dims [0, 1] : tensor<4x8xf16> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A static scale is a constant: no scale state, no update_scale, but the
// overflow check and the skip stay.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {memopt.name = "optimizer.step", memopt.role = "optim"})
// CHECK: %[[SCALE:.*]] = memopt.constant dense<1.280000e+02> : tensor<f32>
// CHECK: %{{.*}}, %[[INF:.*]] = memopt.unscale %[[SCALE]]
// CHECK: memopt.increment %[[STEP]] skip_if %[[INF]]
// CHECK: memopt.sgd_update {{.*}} skip_if %[[INF]]
// CHECK-NOT: memopt.update_scale
func.func @static(%x: tensor<8xf32> {memopt.role = "input", memopt.name = "x"},
                  %w: tensor<8xf32> {memopt.role = "param", memopt.name = "w"})
    -> tensor<f32> attributes {memopt.loss, memopt.loss_scale = {mode = "static", scale = 128.0 : f64}} {
  %m = memopt.mul %x, %w : tensor<8xf32>
  %l = memopt.reduce_sum %m dims [0] : tensor<8xf32> to tensor<f32>
  return %l : tensor<f32>
}
