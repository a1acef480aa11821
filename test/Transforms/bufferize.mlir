// RUN: memopt-opt %s --memopt-bufferize -split-input-file | FileCheck %s

// A linear layer trained with SGD: the loss goes into the new %loss
// argument, the parameter, its momentum buffer and the step counter are
// updated in place, every other value lives from an alloc before its producer
// to a dealloc after its last use.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: memref<4x8xf32> {memopt.name = "x", memopt.role = "input"},
// CHECK-SAME: %[[Y:.*]]: memref<4x3xf32> {memopt.name = "y", memopt.role = "label"},
// CHECK-SAME: %[[W:.*]]: memref<3x8xf32> {memopt.name = "fc.weight", memopt.role = "param"},
// CHECK-SAME: %[[B:.*]]: memref<3x8xf32> {memopt.name = "optimizer.fc.weight.momentum_buffer", memopt.role = "optim"},
// CHECK-SAME: %[[T:.*]]: memref<i64> {memopt.name = "optimizer.step", memopt.role = "optim"},
// CHECK-SAME: %[[LOSS:.*]]: memref<f32> {memopt.name = "loss", memopt.role = "loss"})
// CHECK-SAME: attributes {memopt.train_step} {
// CHECK-NEXT: %[[H:.*]] = memref.alloc() : memref<4x3xf32>
// CHECK-NEXT: memopt.kernel "memopt.matmul" ins(%[[X]], %[[W]] : memref<4x8xf32>, memref<3x8xf32>) outs(%[[H]] : memref<4x3xf32>) with {transpose_rhs} {memopt.scope = "fc"}
// CHECK-NEXT: memopt.kernel "memopt.mse_loss" ins(%[[H]], %[[Y]] : {{.*}}) outs(%[[LOSS]] : memref<f32>) with {reduction = #memopt.reduction<mean>}
// CHECK-NEXT: %[[ONE:.*]] = memref.alloc() : memref<f32>
// CHECK-NEXT: memopt.kernel "memopt.constant" outs(%[[ONE]] : memref<f32>) with {value = dense<1.000000e+00> : tensor<f32>}
// CHECK-NEXT: %[[DH:.*]] = memref.alloc() : memref<4x3xf32>
// CHECK-NEXT: memopt.kernel "memopt.mse_loss_grad" ins(%[[H]], %[[Y]], %[[ONE]] : {{.*}}) outs(%[[DH]] : memref<4x3xf32>)
// CHECK-DAG: memref.dealloc %[[ONE]] : memref<f32>
// CHECK-DAG: memref.dealloc %[[H]] : memref<4x3xf32>
// CHECK-NEXT: %[[DW:.*]] = memref.alloc() : memref<3x8xf32>
// CHECK-NEXT: memopt.kernel "memopt.matmul" ins(%[[DH]], %[[X]] : {{.*}}) outs(%[[DW]] : memref<3x8xf32>) with {transpose_lhs} {memopt.scope = "fc"}
// CHECK-NEXT: memref.dealloc %[[DH]]
// CHECK-NEXT: memopt.kernel "memopt.increment" ins(%[[T]] : memref<i64>) outs(%[[T]] : memref<i64>) with {}
// CHECK-NEXT: memopt.kernel "memopt.sgd_update" ins(%[[W]], %[[DW]], %[[B]] : {{.*}}) outs(%[[W]], %[[B]] : memref<3x8xf32>, memref<3x8xf32>) with {lr = 1.000000e-01 : f64, momentum = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64}
// CHECK-NEXT: memref.dealloc %[[DW]]
// CHECK-NEXT: return{{$}}

func.func @train_step(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x"},
                      %y: tensor<4x3xf32> {memopt.role = "label", memopt.name = "y"},
                      %w: tensor<3x8xf32> {memopt.role = "param", memopt.name = "fc.weight"},
                      %buf: tensor<3x8xf32> {memopt.role = "optim", memopt.name = "optimizer.fc.weight.momentum_buffer"},
                      %t: tensor<i64> {memopt.role = "optim", memopt.name = "optimizer.step"})
    -> (tensor<f32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<i64>) attributes {memopt.train_step} {
  %h = memopt.matmul %x, %w transpose_rhs {memopt.scope = "fc"} : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x3xf32>
  %l = memopt.mse_loss %h, %y : tensor<4x3xf32>
  %one = memopt.constant dense<1.0> : tensor<f32>
  %dh = memopt.mse_loss_grad %h, %y, %one : tensor<4x3xf32>
  %dw = memopt.matmul %dh, %x transpose_lhs {memopt.scope = "fc"} : tensor<4x3xf32>, tensor<4x8xf32> -> tensor<3x8xf32>
  %t1 = memopt.increment %t
  %w2, %b2 = memopt.sgd_update %w, %dw, %buf lr 1.0e-01 momentum 0.0 weight_decay 0.0 : tensor<3x8xf32>
  return %l, %w2, %b2, %t1 : tensor<f32>, tensor<3x8xf32>, tensor<3x8xf32>, tensor<i64>
}

// -----

// The old value of %w is read after its new value is computed: the new value
// gets a buffer and is copied into %w at the end of the step.

// CHECK-LABEL: func.func @read_after_update
// CHECK-SAME: (%[[W:.*]]: memref<4xf32> {{.*}}, %[[LOSS:.*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[W2:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.mul_scalar" ins(%[[W]] : memref<4xf32>) outs(%[[W2]] : memref<4xf32>) with {value = 2.000000e+00 : f64}
// CHECK-NEXT: %[[S:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.mul" ins(%[[W]], %[[W]] : {{.*}}) outs(%[[S]] : memref<4xf32>)
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[S]] : memref<4xf32>) outs(%[[LOSS]] : memref<f32>) with {dims = array<i64: 0>}
// CHECK-NEXT: memref.dealloc %[[S]]
// CHECK-NEXT: memopt.kernel "memopt.reshape" ins(%[[W2]] : memref<4xf32>) outs(%[[W]] : memref<4xf32>) with {}
// CHECK-NEXT: memref.dealloc %[[W2]]
// CHECK-NEXT: return{{$}}
func.func @read_after_update(%w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"})
    -> (tensor<f32>, tensor<4xf32>) attributes {memopt.train_step} {
  %w2 = memopt.mul_scalar %w, 2.0 : tensor<4xf32>
  %s = memopt.mul %w, %w : tensor<4xf32>
  %l = memopt.reduce_sum %s dims [0] : tensor<4xf32> to tensor<f32>
  return %l, %w2 : tensor<f32>, tensor<4xf32>
}

// -----

// Arguments returned as they are: the state keeps its memref untouched; the
// input returned as the loss and the one returned as the new parameter are
// copied; a value returned twice is written in place once and copied once.

// CHECK-LABEL: func.func @returned_arguments
// CHECK-SAME: (%[[L:[^:]*]]: memref<f32> {{.*}}, %[[X:[^:]*]]: memref<4xf32> {{.*}}, %[[S:[^:]*]]: memref<4xf32> {{.*}}, %[[P:[^:]*]]: memref<4xf32> {{.*}}, %[[Q:[^:]*]]: memref<4xf32> {{.*}}, %[[R:[^:]*]]: memref<4xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: memopt.kernel "memopt.relu" ins(%[[X]] : memref<4xf32>) outs(%[[Q]] : memref<4xf32>) with {}
// CHECK-NEXT: memopt.kernel "memopt.reshape" ins(%[[L]] : memref<f32>) outs(%[[LOSS]] : memref<f32>) with {}
// CHECK-NEXT: memopt.kernel "memopt.reshape" ins(%[[X]] : memref<4xf32>) outs(%[[P]] : memref<4xf32>) with {}
// CHECK-NEXT: memopt.kernel "memopt.reshape" ins(%[[Q]] : memref<4xf32>) outs(%[[R]] : memref<4xf32>) with {}
// CHECK-NEXT: return{{$}}
func.func @returned_arguments(%l: tensor<f32> {memopt.role = "input", memopt.name = "l"},
                              %x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"},
                              %s: tensor<4xf32> {memopt.role = "state", memopt.name = "s"},
                              %p: tensor<4xf32> {memopt.role = "param", memopt.name = "p"},
                              %q: tensor<4xf32> {memopt.role = "param", memopt.name = "q"},
                              %r: tensor<4xf32> {memopt.role = "param", memopt.name = "r"})
    -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) attributes {memopt.train_step} {
  %a = memopt.relu %x : tensor<4xf32>
  return %l, %s, %x, %a, %a : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// AdamW writes the parameter and both moments in place even though it reads
// them: the runtime allows those outputs to alias those inputs.

// CHECK-LABEL: func.func @adamw
// CHECK-SAME: (%[[P:[^:]*]]: memref<4xf32> {{.*}}, %[[M:[^:]*]]: memref<4xf32> {{.*}}, %[[V:[^:]*]]: memref<4xf32> {{.*}}, %[[T:[^:]*]]: memref<i64> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK: memopt.kernel "memopt.increment" ins(%[[T]] : memref<i64>) outs(%[[T]] : memref<i64>)
// CHECK-NEXT: memopt.kernel "memopt.adamw_update" ins(%[[P]], %{{.*}}, %[[M]], %[[V]], %[[T]] : {{.*}}) outs(%[[P]], %[[M]], %[[V]] : {{.*}}) with {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64}
// CHECK-NOT: memopt.kernel "memopt.reshape"
func.func @adamw(%p: tensor<4xf32> {memopt.role = "param", memopt.name = "p"},
                 %m: tensor<4xf32> {memopt.role = "optim", memopt.name = "optimizer.p.exp_avg"},
                 %v: tensor<4xf32> {memopt.role = "optim", memopt.name = "optimizer.p.exp_avg_sq"},
                 %t: tensor<i64> {memopt.role = "optim", memopt.name = "optimizer.step"})
    -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) attributes {memopt.train_step} {
  %l = memopt.reduce_sum %p dims [0] : tensor<4xf32> to tensor<f32>
  %g = memopt.constant dense<1.0> : tensor<4xf32>
  %t1 = memopt.increment %t
  %p2, %m2, %v2 = memopt.adamw_update %p, %g, %m, %v step %t1 lr 1.0e-03 betas(9.0e-01, 9.990000e-01) eps 1.0e-08 weight_decay 0.0 : tensor<4xf32>
  return %l, %p2, %m2, %v2, %t1 : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>
}

// -----

// A reduction over dimensions that are not adjacent becomes one kernel per
// run, last run first, through an f32 buffer; extent-1 dimensions between
// reduced ones do not split a run.

// CHECK-LABEL: func.func @split_reduction
// CHECK-SAME: (%[[X:[^:]*]]: memref<2x3x1x2xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[R:.*]] = memref.alloc() : memref<3xf32>
// CHECK-NEXT: %[[T:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK-NEXT: memopt.kernel "memopt.reduce_mean" ins(%[[X]] : memref<2x3x1x2xf32>) outs(%[[T]] : memref<2x3xf32>) with {dims = array<i64: 2, 3>}
// CHECK-NEXT: memopt.kernel "memopt.reduce_mean" ins(%[[T]] : memref<2x3xf32>) outs(%[[R]] : memref<3xf32>) with {dims = array<i64: 0>}
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[R]] : memref<3xf32>) outs(%[[LOSS]] : memref<f32>) with {dims = array<i64: 0>}
func.func @split_reduction(%x: tensor<2x3x1x2xf32> {memopt.role = "input", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.train_step} {
  %r = memopt.reduce_mean %x dims [0, 2, 3] : tensor<2x3x1x2xf32> to tensor<3xf32>
  %l = memopt.reduce_sum %r dims [0] : tensor<3xf32> to tensor<f32>
  return %l : tensor<f32>
}
