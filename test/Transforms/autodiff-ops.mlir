// RUN: memopt-opt %s -split-input-file --memopt-autodiff="optimizer=sgd lr=1 weight-decay=0" | FileCheck %s

// The vector-Jacobian product of each differentiable op, one op per split.
// Every differentiable operand is a parameter, so each of its gradients is
// kept; the loss sums the op's result, whose gradient G is the seed 1
// broadcast to the result's shape. CHECK-NEXT pins the whole backward
// section: exactly the ops the product builds, in order, then the update.

// d(-x) = -g.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.neg %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.neg %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]], %{{.*}} lr 1.000000e+00 momentum 0.000000e+00 weight_decay 0.000000e+00 : tensor<4xf32>
func.func @neg(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.neg %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(e^x) = g * e^x, from the forward result.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.exp %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[Y]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @exp(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.exp %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(ln x) = g / x.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.log %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.div %[[G]], %[[X]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @log(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.log %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d sqrt(x) = g / (2 sqrt(x)), from the forward result.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.sqrt %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[TWICE:.*]] = memopt.mul_scalar %[[Y]], 2.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.div %[[G]], %[[TWICE]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @sqrt(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.sqrt %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d x^(-1/2) = -1/2 * g * rsqrt(x)^3, from the forward result.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.rsqrt %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[CUBE:.*]] = memopt.pow_scalar %[[Y]], 3.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[T:.*]] = memopt.mul %[[G]], %[[CUBE]] : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul_scalar %[[T]], -5.000000e-01 : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @rsqrt(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.rsqrt %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// tanh and sigmoid differentiate from their output.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.tanh %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.tanh_grad %[[Y]], %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @tanh(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.tanh %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.sigmoid %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.sigmoid_grad %[[Y]], %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @sigmoid(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.sigmoid %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// relu, silu and gelu differentiate from their input.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.relu %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.relu_grad %[[X]], %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @relu(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.relu %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.silu %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.silu_grad %[[X]], %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @silu(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.silu %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// hardswish, hardsigmoid and mish differentiate from their input too.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.hardswish %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.hardswish_grad %[[X]], %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @hardswish(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.hardswish %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.hardsigmoid %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.hardsigmoid_grad %[[X]], %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @hardsigmoid(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.hardsigmoid %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.mish %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mish_grad %[[X]], %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @mish(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.mish %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.abs %[[X]]
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = memopt.sign %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[S]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @abs(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.abs %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.sin %[[X]]
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[C:.*]] = memopt.cos %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[C]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @sin(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.sin %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.cos %[[X]]
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = memopt.sin %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[N:.*]] = memopt.neg %[[S]] : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[N]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @cos(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.cos %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.erf %[[X]]
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[SQ:.*]] = memopt.mul %[[X]], %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[N:.*]] = memopt.neg %[[SQ]] : tensor<4xf32>
// CHECK-NEXT: %[[E:.*]] = memopt.exp %[[N]] : tensor<4xf32>
// CHECK-NEXT: %[[D:.*]] = memopt.mul_scalar %[[E]], 1.1283791670955126 : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[D]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @erf(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.erf %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.expm1 %[[X]]
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[E:.*]] = memopt.add_scalar %[[Y]], 1.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[E]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @expm1(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.expm1 %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.log1p %[[X]]
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[P:.*]] = memopt.add_scalar %[[X]], 1.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.div %[[G]], %[[P]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @log1p(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.log1p %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.softplus %[[X]]
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = memopt.sigmoid %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[S]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @softplus(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.softplus %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// reduce_max's gradient goes to the elements equal to the maximum, split
// evenly among ties: clamp_grad of x - max (0 there, below 0 elsewhere)
// with min 0 counts them and then passes the share.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[M:.*]] = memopt.reduce_max %[[X]] dims [1] : tensor<2x3xf32> to tensor<2xf32>
// CHECK: %[[PEAK:.*]] = memopt.broadcast %[[M]] dims [0] : tensor<2xf32> to tensor<2x3xf32>
// CHECK-NEXT: %[[GAP:.*]] = memopt.sub %[[X]], %[[PEAK]] : tensor<2x3xf32>
// CHECK-NEXT: %[[ONES:.*]] = memopt.constant dense<1.000000e+00> : tensor<2x3xf32>
// CHECK-NEXT: %[[AT:.*]] = memopt.clamp_grad %[[GAP]], %[[ONES]] min 0.000000e+00 : tensor<2x3xf32>
// CHECK-NEXT: %[[TIES:.*]] = memopt.reduce_sum %[[AT]] dims [1] : tensor<2x3xf32> to tensor<2xf32>
// CHECK-NEXT: %[[SHARE:.*]] = memopt.div %[[G:.*]], %[[TIES]] : tensor<2xf32>
// CHECK-NEXT: %[[SPREAD:.*]] = memopt.broadcast %[[SHARE]] dims [0] : tensor<2xf32> to tensor<2x3xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.clamp_grad %[[GAP]], %[[SPREAD]] min 0.000000e+00 : tensor<2x3xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @reduce_max(%x: tensor<2x3xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %m = memopt.reduce_max %x dims [1] : tensor<2x3xf32> to tensor<2xf32>
  %l = memopt.reduce_sum %m dims [0] : tensor<2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// clamp_grad reads the input and carries the bounds and `inclusive`: a
// relu6 (exclusive) and a clamp_min (inclusive, the default, elided).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[R6:.*]] = memopt.clamp %[[X]] min 0.000000e+00 max 6.000000e+00 inclusive = false : tensor<4xf32>
// CHECK: memopt.clamp %[[R6]] min 1.000000e+00 : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DR6:.*]] = memopt.clamp_grad %[[R6]], %[[G]] min 1.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.clamp_grad %[[X]], %[[DR6]] min 0.000000e+00 max 6.000000e+00 inclusive = false : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @clamp(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %r6 = memopt.clamp %x min 0.0 max 6.0 inclusive = false : tensor<4xf32>
  %y = memopt.clamp %r6 min 1.0 : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// The exact (erf) GELU: gelu_grad carries no approximation.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.gelu %[[X]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.gelu_grad %[[X]], %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @gelu_erf(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.gelu %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// The tanh approximation is carried over to gelu_grad.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.gelu %[[X]] approximate<tanh> : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.gelu_grad %[[X]], %[[G]] approximate<tanh> : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @gelu_tanh(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.gelu %x approximate<tanh> : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(a + b) = (g, g): no op, both updates read the seed's broadcast.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.add %[[A]], %[[B]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[G]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[G]],
func.func @add(%a: tensor<4xf32> {memopt.role = "param", memopt.name = "a"},
               %b: tensor<4xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.add %a, %b : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(a - b) = (g, -g).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.sub %[[A]], %[[B]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.neg %[[G]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[G]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @sub(%a: tensor<4xf32> {memopt.role = "param", memopt.name = "a"},
               %b: tensor<4xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.sub %a, %b : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(a * b) = (g * b, g * a).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.mul %[[A]], %[[B]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.mul %[[G]], %[[B]] : tensor<4xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.mul %[[G]], %[[A]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @mul(%a: tensor<4xf32> {memopt.role = "param", memopt.name = "a"},
               %b: tensor<4xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.mul %a, %b : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(a / b) = (g / b, -(g / b) * (a / b)), reusing the forward quotient.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.div %[[A]], %[[B]] : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.div %[[G]], %[[B]] : tensor<4xf32>
// CHECK-NEXT: %[[T:.*]] = memopt.mul %[[DA]], %[[Y]] : tensor<4xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.neg %[[T]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @div(%a: tensor<4xf32> {memopt.role = "param", memopt.name = "a"},
               %b: tensor<4xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.div %a, %b : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(x + c) = g: no op.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.add_scalar %[[X]], 3.000000e+00 : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[G]],
func.func @add_scalar(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.add_scalar %x, 3.0 : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(c * x) = c * g.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.mul_scalar %[[X]], 3.000000e+00 : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul_scalar %[[G]], 3.000000e+00 : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @mul_scalar(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.mul_scalar %x, 3.0 : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d(x^3) = g * (3 * x^2).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.pow_scalar %[[X]], 3.000000e+00 : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[SQ:.*]] = memopt.pow_scalar %[[X]], 2.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[SLOPE:.*]] = memopt.mul_scalar %[[SQ]], 3.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[SLOPE]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @pow_scalar(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.pow_scalar %x, 3.0 : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A cast's gradient is cast back to the operand's element type; the sum of
// bf16 into f32 first casts its f32 gradient to bf16.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.cast %[[X]] : tensor<4xf32> to tensor<4xbf16>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[ONE16:.*]] = memopt.cast %[[ONE]] : tensor<f32> to tensor<bf16>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE16]] dims [] : tensor<bf16> to tensor<4xbf16>
// CHECK-NEXT: %[[DX:.*]] = memopt.cast %[[G]] : tensor<4xbf16> to tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @cast(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.cast %x : tensor<4xf32> to tensor<4xbf16>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xbf16> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// where routes g to the selected side and zeros to the other; the condition
// gets no gradient.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[C:[^:]*]]: tensor<4xi1> {memopt.name = "c", memopt.role = "input"}, %[[A:[^:]*]]: tensor<4xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.where %[[C]], %[[A]], %[[B]] : tensor<4xi1>, tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[ZERO:.*]] = memopt.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.where %[[C]], %[[G]], %[[ZERO]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.where %[[C]], %[[ZERO]], %[[G]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @where(%c: tensor<4xi1> {memopt.role = "input", memopt.name = "c"},
                 %a: tensor<4xf32> {memopt.role = "param", memopt.name = "a"},
                 %b: tensor<4xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.where %c, %a, %b : tensor<4xi1>, tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Filled positions get a zero gradient, whatever the fill value.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3xf32> {memopt.name = "x", memopt.role = "param"}, %[[M:[^:]*]]: tensor<2x3xi1> {memopt.name = "m", memopt.role = "input"}
// CHECK: memopt.masked_fill %[[X]], %[[M]], -1.000000e+09 : tensor<2x3xf32>, tensor<2x3xi1>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x3xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.masked_fill %[[G]], %[[M]], 0.000000e+00 : tensor<2x3xf32>, tensor<2x3xi1>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @masked_fill(%x: tensor<2x3xf32> {memopt.role = "param", memopt.name = "x"},
                       %m: tensor<2x3xi1> {memopt.role = "input", memopt.name = "m"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.masked_fill %x, %m, -1.0e9 : tensor<2x3xf32>, tensor<2x3xi1>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x3xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Broadcast into a new dimension: the gradient sums over it, with no reshape.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.broadcast %[[X]] dims [1] : tensor<4xf32> to tensor<3x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<3x4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.reduce_sum %[[G]] dims [0] : tensor<3x4xf32> to tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @broadcast_new_dim(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.broadcast %x dims [1] : tensor<4xf32> to tensor<3x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Broadcast of a size-1 dimension: the gradient sums over the repeated
// dimension (not over the kept one) and reshapes back to the operand's type.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.broadcast %[[X]] dims [0, 1] : tensor<1x4xf32> to tensor<3x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<3x4xf32>
// CHECK-NEXT: %[[S:.*]] = memopt.reduce_sum %[[G]] dims [0] : tensor<3x4xf32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.reshape %[[S]] : tensor<4xf32> to tensor<1x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @broadcast_size_one(%x: tensor<1x4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.broadcast %x dims [0, 1] : tensor<1x4xf32> to tensor<3x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x6xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.reshape %[[X]] : tensor<2x6xf32> to tensor<3x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<3x4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.reshape %[[G]] : tensor<3x4xf32> to tensor<2x6xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @reshape(%x: tensor<2x6xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.reshape %x : tensor<2x6xf32> to tensor<3x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// The gradient of a transpose by [1, 2, 0] is the transpose by its inverse
// [2, 0, 1] (a permutation that is not its own inverse).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3x4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.transpose %[[X]] perm [1, 2, 0] : tensor<2x3x4xf32> to tensor<3x4x2xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<3x4x2xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.transpose %[[G]] perm [2, 0, 1] : tensor<3x4x2xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @transpose(%x: tensor<2x3x4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.transpose %x perm [1, 2, 0] : tensor<2x3x4xf32> to tensor<3x4x2xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2] : tensor<3x4x2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x6xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.slice %[[X]] starts [1, 0] limits [4, 6] strides [1, 2] : tensor<4x6xf32> to tensor<3x3xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<3x3xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.slice_grad %[[G]] starts [1, 0] limits [4, 6] strides [1, 2] : tensor<3x3xf32> to tensor<4x6xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @slice(%x: tensor<4x6xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.slice %x starts [1, 0] limits [4, 6] strides [1, 2] : tensor<4x6xf32> to tensor<3x3xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<3x3xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Each concatenated operand gets its slice of g, at its running offset.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x3xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<2x1xf32> {memopt.name = "b", memopt.role = "param"}, %[[C:[^:]*]]: tensor<2x4xf32> {memopt.name = "c", memopt.role = "param"}
// CHECK: memopt.concat %[[A]], %[[B]], %[[C]] dim 1 : tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x8xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.slice %[[G]] starts [0, 0] limits [2, 3] strides [1, 1] : tensor<2x8xf32> to tensor<2x3xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.slice %[[G]] starts [0, 3] limits [2, 4] strides [1, 1] : tensor<2x8xf32> to tensor<2x1xf32>
// CHECK-NEXT: %[[DC:.*]] = memopt.slice %[[G]] starts [0, 4] limits [2, 8] strides [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
// CHECK-NEXT: memopt.sgd_update %[[C]], %[[DC]],
func.func @concat(%a: tensor<2x3xf32> {memopt.role = "param", memopt.name = "a"},
                  %b: tensor<2x1xf32> {memopt.role = "param", memopt.name = "b"},
                  %c: tensor<2x4xf32> {memopt.role = "param", memopt.name = "c"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.concat %a, %b, %c dim 1 : tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x8xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A partial sum broadcasts its gradient back along the kept dimensions.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3x4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.reduce_sum %[[X]] dims [1] : tensor<2x3x4xf32> to tensor<2x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.broadcast %[[G]] dims [0, 2] : tensor<2x4xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @reduce_sum(%x: tensor<2x3x4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.reduce_sum %x dims [1] : tensor<2x3x4xf32> to tensor<2x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A mean over 2 * 4 elements spreads 1/8 of its gradient to each.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3x4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.reduce_mean %[[X]] dims [0, 2] : tensor<2x3x4xf32> to tensor<3xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<3xf32>
// CHECK-NEXT: %[[SPREAD:.*]] = memopt.broadcast %[[G]] dims [1] : tensor<3xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul_scalar %[[SPREAD]], 1.250000e-01 : tensor<2x3x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @reduce_mean(%x: tensor<2x3x4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.reduce_mean %x dims [0, 2] : tensor<2x3x4xf32> to tensor<3xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<3xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// softmax and log_softmax differentiate from their output, along their dim.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.softmax %[[X]] dim 0 : tensor<2x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.softmax_grad %[[Y]], %[[G]] dim 0 : tensor<2x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @softmax(%x: tensor<2x4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.softmax %x dim 0 : tensor<2x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.log_softmax %[[X]] dim 1 : tensor<2x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.log_softmax_grad %[[Y]], %[[G]] dim 1 : tensor<2x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @log_softmax(%x: tensor<2x4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.log_softmax %x dim 1 : tensor<2x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// layer_norm_grad reads the saved mean and rstd and yields the gradients of
// input, weight and bias in operand order.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x8xf32> {memopt.name = "x", memopt.role = "param"}, %[[W:[^:]*]]: tensor<8xf32> {memopt.name = "ln.weight", memopt.role = "param"}, %[[B:[^:]*]]: tensor<8xf32> {memopt.name = "ln.bias", memopt.role = "param"}
// CHECK: %[[Y:[^,]*]], %[[MEAN:[^,]*]], %[[RSTD:[^ ]*]] = memopt.layer_norm %[[X]], %[[W]], %[[B]] eps
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x8xf32>
// CHECK-NEXT: %[[DX:[^,]*]], %[[DW:[^,]*]], %[[DB:[^ ]*]] = memopt.layer_norm_grad %[[G]], %[[X]], %[[W]], %[[MEAN]], %[[RSTD]] : tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
// CHECK-NEXT: memopt.sgd_update %[[W]], %[[DW]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @layer_norm(%x: tensor<2x8xf32> {memopt.role = "param", memopt.name = "x"},
                      %w: tensor<8xf32> {memopt.role = "param", memopt.name = "ln.weight"},
                      %b: tensor<8xf32> {memopt.role = "param", memopt.name = "ln.bias"}) -> tensor<f32> attributes {memopt.loss} {
  %y, %m, %r = memopt.layer_norm %x, %w, %b eps 1.0e-05 : tensor<2x8xf32>, tensor<8xf32> -> tensor<2xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x8xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x8xf32> {memopt.name = "x", memopt.role = "param"}, %[[W:[^:]*]]: tensor<8xf32> {memopt.name = "norm.weight", memopt.role = "param"}
// CHECK: %[[Y:[^,]*]], %[[RSTD:[^ ]*]] = memopt.rms_norm %[[X]], %[[W]] eps
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x8xf32>
// CHECK-NEXT: %[[DX:[^,]*]], %[[DW:[^ ]*]] = memopt.rms_norm_grad %[[G]], %[[X]], %[[W]], %[[RSTD]] : tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
// CHECK-NEXT: memopt.sgd_update %[[W]], %[[DW]],
func.func @rms_norm(%x: tensor<2x8xf32> {memopt.role = "param", memopt.name = "x"},
                    %w: tensor<8xf32> {memopt.role = "param", memopt.name = "norm.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %y, %r = memopt.rms_norm %x, %w eps 1.0e-06 : tensor<2x8xf32>, tensor<8xf32> -> tensor<2xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x8xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// batch_norm_grad yields input, weight and bias gradients; the running
// statistics (state) get none and pass through to the results.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3x2x2xf32> {memopt.name = "x", memopt.role = "param"}, %[[W:[^:]*]]: tensor<3xf32> {memopt.name = "bn.weight", memopt.role = "param"}, %[[B:[^:]*]]: tensor<3xf32> {memopt.name = "bn.bias", memopt.role = "param"}, %[[RM:[^:]*]]: tensor<3xf32> {memopt.name = "bn.running_mean", memopt.role = "state"}, %[[RV:[^:]*]]: tensor<3xf32> {memopt.name = "bn.running_var", memopt.role = "state"}
// CHECK: %[[Y:[^,]*]], %[[MEAN:[^,]*]], %[[RSTD:[^,]*]], %[[RM2:[^,]*]], %[[RV2:[^ ]*]] = memopt.batch_norm %[[X]], %[[W]], %[[B]], %[[RM]], %[[RV]] eps
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x3x2x2xf32>
// CHECK-NEXT: %[[DX:[^,]*]], %[[DW:[^,]*]], %[[DB:[^ ]*]] = memopt.batch_norm_grad %[[G]], %[[X]], %[[W]], %[[MEAN]], %[[RSTD]] : tensor<2x3x2x2xf32>, tensor<3xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: %[[NX:[^,]*]], %{{.*}} = memopt.sgd_update %[[X]], %[[DX]],
// CHECK-NEXT: %[[NW:[^,]*]], %{{.*}} = memopt.sgd_update %[[W]], %[[DW]],
// CHECK-NEXT: %[[NB:[^,]*]], %{{.*}} = memopt.sgd_update %[[B]], %[[DB]],
// CHECK-NEXT: return %{{[^,]*}}, %[[NX]], %[[NW]], %[[NB]], %[[RM2]], %[[RV2]],
func.func @batch_norm(%x: tensor<2x3x2x2xf32> {memopt.role = "param", memopt.name = "x"},
                      %w: tensor<3xf32> {memopt.role = "param", memopt.name = "bn.weight"},
                      %b: tensor<3xf32> {memopt.role = "param", memopt.name = "bn.bias"},
                      %rm: tensor<3xf32> {memopt.role = "state", memopt.name = "bn.running_mean"},
                      %rv: tensor<3xf32> {memopt.role = "state", memopt.name = "bn.running_var"}) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>) attributes {memopt.loss} {
  %y, %m, %r, %rm2, %rv2 = memopt.batch_norm %x, %w, %b, %rm, %rv eps 1.0e-05 momentum 0.1 : tensor<2x3x2x2xf32>, tensor<3xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2, 3] : tensor<2x3x2x2xf32> to tensor<f32>
  return %l, %rm2, %rv2 : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// C = A B: dA = G B^T, dB = A^T G, the transposes folded into the flags.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x3xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<3x4xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.matmul %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.matmul %[[G]], %[[B]] transpose_rhs : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.matmul %[[A]], %[[G]] transpose_lhs : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @matmul(%a: tensor<2x3xf32> {memopt.role = "param", memopt.name = "a"},
                  %b: tensor<3x4xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// C = A^T B: dA = B G^T, dB = A G.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<3x2xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<3x4xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.matmul %[[A]], %[[B]] transpose_lhs : tensor<3x2xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.matmul %[[B]], %[[G]] transpose_rhs : tensor<3x4xf32>, tensor<2x4xf32> -> tensor<3x2xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.matmul %[[A]], %[[G]] : tensor<3x2xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @matmul_transpose_lhs(%a: tensor<3x2xf32> {memopt.role = "param", memopt.name = "a"},
                                %b: tensor<3x4xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %a, %b transpose_lhs : tensor<3x2xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// C = A B^T: dA = G B, dB = G^T A.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x3xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4x3xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.matmul %[[A]], %[[B]] transpose_rhs : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.matmul %[[G]], %[[B]] : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.matmul %[[G]], %[[A]] transpose_lhs : tensor<2x4xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @matmul_transpose_rhs(%a: tensor<2x3xf32> {memopt.role = "param", memopt.name = "a"},
                                %b: tensor<4x3xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %a, %b transpose_rhs : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// C = A^T B^T: dA = B^T G^T, dB = G^T A^T.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<3x2xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4x3xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.matmul %[[A]], %[[B]] transpose_lhs transpose_rhs : tensor<3x2xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.matmul %[[B]], %[[G]] transpose_lhs transpose_rhs : tensor<4x3xf32>, tensor<2x4xf32> -> tensor<3x2xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.matmul %[[G]], %[[A]] transpose_lhs transpose_rhs : tensor<2x4xf32>, tensor<3x2xf32> -> tensor<4x3xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @matmul_transpose_both(%a: tensor<3x2xf32> {memopt.role = "param", memopt.name = "a"},
                                 %b: tensor<4x3xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %a, %b transpose_lhs transpose_rhs : tensor<3x2xf32>, tensor<4x3xf32> -> tensor<2x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1] : tensor<2x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Both operands batched: per-batch products, no sum over the batch.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x2x3xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<2x3x4xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.matmul %[[A]], %[[B]] : tensor<2x2x3xf32>, tensor<2x3x4xf32> -> tensor<2x2x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x2x4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.matmul %[[G]], %[[B]] transpose_rhs : tensor<2x2x4xf32>, tensor<2x3x4xf32> -> tensor<2x2x3xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.matmul %[[A]], %[[G]] transpose_lhs : tensor<2x2x3xf32>, tensor<2x2x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @matmul_batched(%a: tensor<2x2x3xf32> {memopt.role = "param", memopt.name = "a"},
                          %b: tensor<2x3x4xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %a, %b : tensor<2x2x3xf32>, tensor<2x3x4xf32> -> tensor<2x2x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2] : tensor<2x2x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Shared rhs (nn.Linear on a batched input): dB sums over the batch as one
// product over the flattened rows.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x3x4xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4x5xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.matmul %[[A]], %[[B]] : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x3x5xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.matmul %[[G]], %[[B]] transpose_rhs : tensor<2x3x5xf32>, tensor<4x5xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[AROWS:.*]] = memopt.reshape %[[A]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[GROWS:.*]] = memopt.reshape %[[G]] : tensor<2x3x5xf32> to tensor<6x5xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.matmul %[[AROWS]], %[[GROWS]] transpose_lhs : tensor<6x4xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @matmul_shared_rhs(%a: tensor<2x3x4xf32> {memopt.role = "param", memopt.name = "a"},
                             %b: tensor<4x5xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %a, %b : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2] : tensor<2x3x5xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Shared rhs under a transposed batched lhs: the rows cannot be flattened,
// so dB is a per-batch product summed over the batch.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x4x3xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<4x5xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.matmul %[[A]], %[[B]] transpose_lhs : tensor<2x4x3xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x3x5xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.matmul %[[B]], %[[G]] transpose_rhs : tensor<4x5xf32>, tensor<2x3x5xf32> -> tensor<2x4x3xf32>
// CHECK-NEXT: %[[P:.*]] = memopt.matmul %[[A]], %[[G]] : tensor<2x4x3xf32>, tensor<2x3x5xf32> -> tensor<2x4x5xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.reduce_sum %[[P]] dims [0] : tensor<2x4x5xf32> to tensor<4x5xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @matmul_shared_rhs_transpose_lhs(%a: tensor<2x4x3xf32> {memopt.role = "param", memopt.name = "a"},
                                           %b: tensor<4x5xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %a, %b transpose_lhs : tensor<2x4x3xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2] : tensor<2x3x5xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Shared lhs: dA is a per-batch product summed over the batch.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<3x4xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<2x4x5xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.matmul %[[A]], %[[B]] : tensor<3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x3x5xf32>
// CHECK-NEXT: %[[P:.*]] = memopt.matmul %[[G]], %[[B]] transpose_rhs : tensor<2x3x5xf32>, tensor<2x4x5xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[DA:.*]] = memopt.reduce_sum %[[P]] dims [0] : tensor<2x3x4xf32> to tensor<3x4xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.matmul %[[A]], %[[G]] transpose_lhs : tensor<3x4xf32>, tensor<2x3x5xf32> -> tensor<2x4x5xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @matmul_shared_lhs(%a: tensor<3x4xf32> {memopt.role = "param", memopt.name = "a"},
                             %b: tensor<2x4x5xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %a, %b : tensor<3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2] : tensor<2x3x5xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[W:[^:]*]]: tensor<5x4xf32> {memopt.name = "wte.weight", memopt.role = "param"}, %[[IDS:[^:]*]]: tensor<2x3xi64> {memopt.name = "idx", memopt.role = "input"}
// CHECK: memopt.embedding %[[W]], %[[IDS]] : tensor<5x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[DW:.*]] = memopt.embedding_grad %[[G]], %[[IDS]] : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<5x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[W]], %[[DW]],
func.func @embedding(%w: tensor<5x4xf32> {memopt.role = "param", memopt.name = "wte.weight"},
                     %ids: tensor<2x3xi64> {memopt.role = "input", memopt.name = "idx"}) -> tensor<f32> attributes {memopt.loss} {
  %e = memopt.embedding %w, %ids : tensor<5x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %l = memopt.reduce_sum %e dims [0, 1, 2] : tensor<2x3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// padding_idx passes to the gradient.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[W:[^:]*]]: tensor<5x4xf32> {memopt.name = "wte.weight", memopt.role = "param"}, %[[IDS:[^:]*]]: tensor<2x3xi64> {memopt.name = "idx", memopt.role = "input"}
// CHECK: memopt.embedding %[[W]], %[[IDS]] padding_idx 2 : tensor<5x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[DW:.*]] = memopt.embedding_grad %[[G]], %[[IDS]] padding_idx 2 : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<5x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[W]], %[[DW]],
func.func @embedding_padding_idx(%w: tensor<5x4xf32> {memopt.role = "param", memopt.name = "wte.weight"},
                                 %ids: tensor<2x3xi64> {memopt.role = "input", memopt.name = "idx"}) -> tensor<f32> attributes {memopt.loss} {
  %e = memopt.embedding %w, %ids padding_idx 2 : tensor<5x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %l = memopt.reduce_sum %e dims [0, 1, 2] : tensor<2x3x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Both convolution gradients carry every non-default attribute of the
// forward convolution.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x2x5x5xf32> {memopt.name = "x", memopt.role = "param"}, %[[W:[^:]*]]: tensor<4x1x3x3xf32> {memopt.name = "conv.weight", memopt.role = "param"}
// CHECK: memopt.conv2d %[[X]], %[[W]] strides [2, 2] padding [1, 1] dilations [2, 2] groups 2 : tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32> -> tensor<1x4x2x2xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<1x4x2x2xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.conv2d_grad_input %[[G]], %[[W]] strides [2, 2] padding [1, 1] dilations [2, 2] groups 2 : tensor<1x4x2x2xf32>, tensor<4x1x3x3xf32> -> tensor<1x2x5x5xf32>
// CHECK-NEXT: %[[DW:.*]] = memopt.conv2d_grad_filter %[[G]], %[[X]] strides [2, 2] padding [1, 1] dilations [2, 2] groups 2 : tensor<1x4x2x2xf32>, tensor<1x2x5x5xf32> -> tensor<4x1x3x3xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
// CHECK-NEXT: memopt.sgd_update %[[W]], %[[DW]],
func.func @conv2d(%x: tensor<1x2x5x5xf32> {memopt.role = "param", memopt.name = "x"},
                  %w: tensor<4x1x3x3xf32> {memopt.role = "param", memopt.name = "conv.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.conv2d %x, %w strides [2, 2] padding [1, 1] dilations [2, 2] groups 2 : tensor<1x2x5x5xf32>, tensor<4x1x3x3xf32> -> tensor<1x4x2x2xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2, 3] : tensor<1x4x2x2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A scatter-add (embedding_grad in the forward; repeated indices add up)
// passes each source row the result gradient's row it was added to: a
// lookup.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[S:[^:]*]]: tensor<3x2xf32> {memopt.name = "src", memopt.role = "param"}
// CHECK: %[[I:.*]] = memopt.constant dense<[0, 2, 2]> : tensor<3xi64>
// CHECK: memopt.embedding_grad %[[S]], %[[I]] : tensor<3x2xf32>, tensor<3xi64> -> tensor<4x2xf32>
// CHECK: %[[G:.*]] = memopt.broadcast %{{.*}} dims [] : tensor<f32> to tensor<4x2xf32>
// CHECK-NEXT: %[[DS:.*]] = memopt.embedding %[[G]], %[[I]] : tensor<4x2xf32>, tensor<3xi64> -> tensor<3x2xf32>
// CHECK: memopt.sgd_update %[[S]], %[[DS]],
func.func @scatter_add(%src: tensor<3x2xf32> {memopt.role = "param", memopt.name = "src"}) -> tensor<f32> attributes {memopt.loss} {
  %i = memopt.constant dense<[0, 2, 2]> : tensor<3xi64>
  %t = memopt.embedding_grad %src, %i : tensor<3x2xf32>, tensor<3xi64> -> tensor<4x2xf32>
  %l = memopt.reduce_sum %t dims [0, 1] : tensor<4x2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A transposed convolution (conv2d_grad_input in the forward) is linear in
// both operands: dx is the convolution of g by the filter, dw the filter
// gradient of that convolution with x in the result gradient's place.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x4x2x2xf32> {memopt.name = "x", memopt.role = "param"}, %[[W:[^:]*]]: tensor<4x1x3x3xf32> {memopt.name = "deconv.weight", memopt.role = "param"}
// CHECK: memopt.conv2d_grad_input %[[X]], %[[W]] strides [2, 2] padding [1, 1] groups 2 : tensor<1x4x2x2xf32>, tensor<4x1x3x3xf32> -> tensor<1x2x4x4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<1x2x4x4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.conv2d %[[G]], %[[W]] strides [2, 2] padding [1, 1] groups 2 : tensor<1x2x4x4xf32>, tensor<4x1x3x3xf32> -> tensor<1x4x2x2xf32>
// CHECK-NEXT: %[[DW:.*]] = memopt.conv2d_grad_filter %[[X]], %[[G]] strides [2, 2] padding [1, 1] groups 2 : tensor<1x4x2x2xf32>, tensor<1x2x4x4xf32> -> tensor<4x1x3x3xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
// CHECK-NEXT: memopt.sgd_update %[[W]], %[[DW]],
func.func @conv_transpose2d(%x: tensor<1x4x2x2xf32> {memopt.role = "param", memopt.name = "x"},
                            %w: tensor<4x1x3x3xf32> {memopt.role = "param", memopt.name = "deconv.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.conv2d_grad_input %x, %w strides [2, 2] padding [1, 1] groups 2 : tensor<1x4x2x2xf32>, tensor<4x1x3x3xf32> -> tensor<1x2x4x4xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2, 3] : tensor<1x2x4x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Max pooling routes g through the maxima of the forward input.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x1x4x4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.max_pool2d %[[X]] kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<1x1x4x4xf32> to tensor<1x1x2x2xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<1x1x2x2xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.max_pool2d_grad %[[G]], %[[X]] kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<1x1x2x2xf32>, tensor<1x1x4x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @max_pool2d(%x: tensor<1x1x4x4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.max_pool2d %x kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<1x1x4x4xf32> to tensor<1x1x2x2xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2, 3] : tensor<1x1x2x2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Average pooling spreads g over each window; it does not read the input.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x1x4x4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.avg_pool2d %[[X]] kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<1x1x4x4xf32> to tensor<1x1x2x2xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<1x1x2x2xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.avg_pool2d_grad %[[G]] kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<1x1x2x2xf32> to tensor<1x1x4x4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @avg_pool2d(%x: tensor<1x1x4x4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.avg_pool2d %x kernel [3, 3] strides [2, 2] padding [1, 1] : tensor<1x1x4x4xf32> to tensor<1x1x2x2xf32>
  %l = memopt.reduce_sum %y dims [0, 1, 2, 3] : tensor<1x1x2x2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Dropout's backward is the same dropout (same p, seed and stream) of g.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.dropout %[[X]] p 2.500000e-01 seed 7 stream 3 : tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.dropout %[[G]] p 2.500000e-01 seed 7 stream 3 : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @dropout(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.dropout %x p 0.25 seed 7 stream 3 : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// The loss itself: the seed feeds cross_entropy_grad directly, which keeps
// ignore_index and the reduction.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x5xf32> {memopt.name = "x", memopt.role = "param"}, %[[T:[^:]*]]: tensor<2xi64> {memopt.name = "t", memopt.role = "label"}
// CHECK: memopt.cross_entropy %[[X]], %[[T]] ignore_index 1 reduction<sum> : tensor<2x5xf32>, tensor<2xi64>
// CHECK-NEXT: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DX:.*]] = memopt.cross_entropy_grad %[[X]], %[[T]], %[[ONE]] ignore_index 1 reduction<sum> : tensor<2x5xf32>, tensor<2xi64>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @cross_entropy(%x: tensor<2x5xf32> {memopt.role = "param", memopt.name = "x"},
                         %t: tensor<2xi64> {memopt.role = "label", memopt.name = "t"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.cross_entropy %x, %t ignore_index 1 reduction<sum> : tensor<2x5xf32>, tensor<2xi64>
  return %l : tensor<f32>
}

// -----

// Label smoothing passes to the gradient with the other attributes.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x5xf32> {memopt.name = "x", memopt.role = "param"}, %[[T:[^:]*]]: tensor<2xi64> {memopt.name = "t", memopt.role = "label"}
// CHECK: memopt.cross_entropy %[[X]], %[[T]] ignore_index 1 label_smoothing 1.000000e-01 : tensor<2x5xf32>, tensor<2xi64>
// CHECK-NEXT: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DX:.*]] = memopt.cross_entropy_grad %[[X]], %[[T]], %[[ONE]] ignore_index 1 label_smoothing 1.000000e-01 : tensor<2x5xf32>, tensor<2xi64>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @cross_entropy_label_smoothing(%x: tensor<2x5xf32> {memopt.role = "param", memopt.name = "x"},
                                         %t: tensor<2xi64> {memopt.role = "label", memopt.name = "t"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.cross_entropy %x, %t ignore_index 1 label_smoothing 0.1 : tensor<2x5xf32>, tensor<2xi64>
  return %l : tensor<f32>
}

// -----

// d mse(a, b) = (d, -d) with d = mse_loss_grad(a, b, g).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x3xf32> {memopt.name = "a", memopt.role = "param"}, %[[B:[^:]*]]: tensor<2x3xf32> {memopt.name = "b", memopt.role = "param"}
// CHECK: memopt.mse_loss %[[A]], %[[B]] reduction<sum> : tensor<2x3xf32>
// CHECK-NEXT: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DA:.*]] = memopt.mse_loss_grad %[[A]], %[[B]], %[[ONE]] reduction<sum> : tensor<2x3xf32>
// CHECK-NEXT: %[[DB:.*]] = memopt.neg %[[DA]] : tensor<2x3xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[A]], %[[DA]],
// CHECK-NEXT: memopt.sgd_update %[[B]], %[[DB]],
func.func @mse_loss(%a: tensor<2x3xf32> {memopt.role = "param", memopt.name = "a"},
                    %b: tensor<2x3xf32> {memopt.role = "param", memopt.name = "b"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.mse_loss %a, %b reduction<sum> : tensor<2x3xf32>
  return %l : tensor<f32>
}

// -----

// Indices, masks, labels and float inputs get no gradient: the products for
// the labels and the condition are null, and the one where builds for the
// input %x (where %m, 0, g) feeds nothing and is removed.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[W:[^:]*]]: tensor<5x4xf32> {memopt.name = "wte.weight", memopt.role = "param"}, %[[IDS:[^:]*]]: tensor<2x3xi64> {memopt.name = "idx", memopt.role = "input"}, %[[M:[^:]*]]: tensor<2x3x4xi1> {memopt.name = "m", memopt.role = "input"}, %[[X:[^:]*]]: tensor<2x3x4xf32> {memopt.name = "x", memopt.role = "input"}, %[[T:[^:]*]]: tensor<2x3xi64> {memopt.name = "t", memopt.role = "label"}
// CHECK-SAME: -> (tensor<f32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<i64>)
// CHECK: %[[S:.*]] = memopt.where
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DS:.*]] = memopt.cross_entropy_grad %[[S]], %[[T]], %[[ONE]] :
// CHECK-NEXT: %[[ZERO:.*]] = memopt.constant dense<0.000000e+00> : tensor<2x3x4xf32>
// CHECK-NEXT: %[[DE:.*]] = memopt.where %[[M]], %[[DS]], %[[ZERO]] :
// CHECK-NOT: memopt.where %[[M]], %[[ZERO]], %[[DS]]
// CHECK-NEXT: %[[DW:.*]] = memopt.embedding_grad %[[DE]], %[[IDS]] :
// CHECK-NOT: %[[T]]
// CHECK-NOT: %[[M]]
// CHECK-NOT: %[[IDS]]
// CHECK-NOT: %[[X]]
// CHECK: memopt.sgd_update %[[W]], %[[DW]],
// CHECK-NOT: memopt.
// CHECK: return
func.func @no_gradient(%w: tensor<5x4xf32> {memopt.role = "param", memopt.name = "wte.weight"},
                       %ids: tensor<2x3xi64> {memopt.role = "input", memopt.name = "idx"},
                       %m: tensor<2x3x4xi1> {memopt.role = "input", memopt.name = "m"},
                       %x: tensor<2x3x4xf32> {memopt.role = "input", memopt.name = "x"},
                       %t: tensor<2x3xi64> {memopt.role = "label", memopt.name = "t"}) -> tensor<f32> attributes {memopt.loss} {
  %e = memopt.embedding %w, %ids : tensor<5x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %s = memopt.where %m, %e, %x : tensor<2x3x4xi1>, tensor<2x3x4xf32>
  %l = memopt.cross_entropy %s, %t : tensor<2x3x4xf32>, tensor<2x3xi64>
  return %l : tensor<f32>
}

// -----

// Fused attention: the backward reads q, k, v, the output and the
// log-sum-exp (not a score-sized tensor) and keeps every attribute; the mask
// gets no gradient.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<2x4x8xf32> {memopt.name = "q", memopt.role = "param"}, %[[K:[^:]*]]: tensor<2x6x8xf32> {memopt.name = "k", memopt.role = "param"}, %[[V:[^:]*]]: tensor<2x6x3xf32> {memopt.name = "v", memopt.role = "param"}, %[[M:[^:]*]]: tensor<2x1x6xi1> {memopt.name = "m", memopt.role = "input"}
// CHECK: %[[O:.*]], %[[LSE:.*]] = memopt.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] scale 5.000000e-01 dropout 2.500000e-01 seed 7 stream 2 :
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = memopt.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %{{.*}} mask %[[M]] scale 5.000000e-01 dropout 2.500000e-01 seed 7 stream 2 : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x3xf32>, tensor<2x4x3xf32>, tensor<2x4xf32>, tensor<2x1x6xi1>
// CHECK: memopt.sgd_update %[[Q]], %[[DQ]],
// CHECK: memopt.sgd_update %[[K]], %[[DK]],
// CHECK: memopt.sgd_update %[[V]], %[[DV]],
func.func @attention(%q: tensor<2x4x8xf32> {memopt.role = "param", memopt.name = "q"},
                     %k: tensor<2x6x8xf32> {memopt.role = "param", memopt.name = "k"},
                     %v: tensor<2x6x3xf32> {memopt.role = "param", memopt.name = "v"},
                     %m: tensor<2x1x6xi1> {memopt.role = "input", memopt.name = "m"}) -> tensor<f32> attributes {memopt.loss} {
  %o, %lse = memopt.attention %q, %k, %v mask %m scale 0.5 dropout 0.25 seed 7 stream 2 : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x3xf32>, tensor<2x1x6xi1> -> tensor<2x4x3xf32>, tensor<2x4xf32>
  %l = memopt.reduce_sum %o dims [0, 1, 2] : tensor<2x4x3xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// The fused linear cross-entropy: the seed feeds its gradient, which reads
// x, w, the labels, the log-sum-exp and the bias, and keeps chunk,
// ignore_index and the reduction.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<3x4xf32> {memopt.name = "x", memopt.role = "param"}, %[[W:[^:]*]]: tensor<5x4xf32> {memopt.name = "w", memopt.role = "param"}, %[[B:[^:]*]]: tensor<5xf32> {memopt.name = "b", memopt.role = "param"}, %[[T:[^:]*]]: tensor<3xi64> {memopt.name = "t", memopt.role = "label"}
// CHECK: %[[L:.*]], %[[LSE:.*]] = memopt.linear_cross_entropy %[[X]], %[[W]], %[[T]] bias %[[B]] chunk 2 ignore_index 1 :
// CHECK-NEXT: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DX:.*]], %[[DW:.*]], %[[DB:.*]] = memopt.linear_cross_entropy_grad %[[X]], %[[W]], %[[T]], %[[LSE]], %[[ONE]] bias %[[B]] chunk 2 ignore_index 1 : tensor<3x4xf32>, tensor<5x4xf32>, tensor<3xi64>, tensor<3xf32>, tensor<5xf32> -> tensor<3x4xf32>, tensor<5x4xf32>, tensor<5xf32>
// CHECK: memopt.sgd_update %[[X]], %[[DX]],
// CHECK: memopt.sgd_update %[[W]], %[[DW]],
// CHECK: memopt.sgd_update %[[B]], %[[DB]],
func.func @linear_cross_entropy(%x: tensor<3x4xf32> {memopt.role = "param", memopt.name = "x"},
                                %w: tensor<5x4xf32> {memopt.role = "param", memopt.name = "w"},
                                %b: tensor<5xf32> {memopt.role = "param", memopt.name = "b"},
                                %t: tensor<3xi64> {memopt.role = "label", memopt.name = "t"}) -> tensor<f32> attributes {memopt.loss} {
  %l, %lse = memopt.linear_cross_entropy %x, %w, %t bias %b chunk 2 ignore_index 1 : tensor<3x4xf32>, tensor<5x4xf32>, tensor<3xi64>, tensor<5xf32> -> tensor<3xf32>
  return %l : tensor<f32>
}

// -----

// d tan(x) = (1 + tan(x)^2) dx, from the result.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[Y:.*]] = memopt.tan %[[X]]
// CHECK: %[[G:.*]] = memopt.broadcast
// CHECK-NEXT: %[[SQ:.*]] = memopt.mul %[[Y]], %[[Y]] : tensor<4xf32>
// CHECK-NEXT: %[[D:.*]] = memopt.add_scalar %[[SQ]], 1.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[D]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @tan(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.tan %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d arcsin(x) = dx / sqrt(1 - x^2); arccos's is its negation.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[G:.*]] = memopt.broadcast
// CHECK-NEXT: %[[SQ:.*]] = memopt.mul %[[X]], %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[N:.*]] = memopt.neg %[[SQ]] : tensor<4xf32>
// CHECK-NEXT: %[[C:.*]] = memopt.add_scalar %[[N]], 1.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = memopt.rsqrt %[[C]] : tensor<4xf32>
// CHECK-NEXT: %[[P:.*]] = memopt.mul %[[G]], %[[R]] : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.neg %[[P]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @acos(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.acos %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// d arctan(x) = dx / (1 + x^2).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[G:.*]] = memopt.broadcast
// CHECK-NEXT: %[[SQ:.*]] = memopt.mul %[[X]], %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[D:.*]] = memopt.add_scalar %[[SQ]], 1.000000e+00 : tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.div %[[G]], %[[D]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @atan(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.atan %x : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// The rounding ops pass no gradient: x's is the 1 of the sum's direct term
// alone.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: memopt.floor %[[X]]
// CHECK: memopt.ceil
// CHECK: memopt.round
// CHECK: memopt.trunc
// CHECK: %[[G:.*]] = memopt.broadcast
// CHECK-NOT: memopt.add
// CHECK: memopt.sgd_update %[[X]], %[[G]],
func.func @rounding(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %a = memopt.floor %x : tensor<4xf32>
  %b = memopt.ceil %a : tensor<4xf32>
  %c = memopt.round %b : tensor<4xf32>
  %d = memopt.trunc %c : tensor<4xf32>
  %e = memopt.add %x, %d : tensor<4xf32>
  %l = memopt.reduce_sum %e dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// sinc: g (cos(pi x) - sinc(x)) / x, with 0 where x is 0.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]] = memopt.sinc %[[X:arg0]]
// CHECK: %[[G:.*]] = memopt.broadcast
// CHECK: %[[P:.*]] = memopt.mul_scalar %[[X]], 3.14159265358979
// CHECK: %[[C:.*]] = memopt.cos %[[P]]
// CHECK: %[[D:.*]] = memopt.sub %[[C]], %[[Y]]
// CHECK: %[[Q:.*]] = memopt.div %[[D]], %[[X]]
// CHECK: %[[Z:.*]] = memopt.constant dense<0.000000e+00>
// CHECK: %[[M:.*]] = memopt.compare eq, %[[X]], %[[Z]]
// CHECK: %[[S:.*]] = memopt.masked_fill %[[Q]], %[[M]], 0.000000e+00
// CHECK: %[[V:.*]] = memopt.mul %[[G]], %[[S]]
// CHECK: memopt.sgd_update %[[X]], %[[V]],
func.func @sinc(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %s = memopt.sinc %x : tensor<4xf32>
  %l = memopt.reduce_sum %s dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// x * float(long(x)): the truncation to an index and its conversion back
// carry no gradient, so d/dx is the converted index alone (g * t), and the
// backward builds nothing for the casts.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.name = "x", memopt.role = "param"}
// CHECK: %[[I:.*]] = memopt.cast %[[X]] : tensor<4xf32> to tensor<4xi64>
// CHECK: %[[T:.*]] = memopt.cast %[[I]] : tensor<4xi64> to tensor<4xf32>
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<4xf32>
// CHECK-NEXT: %[[DX:.*]] = memopt.mul %[[G]], %[[T]] : tensor<4xf32>
// CHECK-NEXT: memopt.increment
// CHECK-NEXT: memopt.sgd_update %[[X]], %[[DX]],
func.func @index_cast(%x: tensor<4xf32> {memopt.role = "param", memopt.name = "x"}) -> tensor<f32> attributes {memopt.loss} {
  %i = memopt.cast %x : tensor<4xf32> to tensor<4xi64>
  %t = memopt.cast %i : tensor<4xi64> to tensor<4xf32>
  %y = memopt.mul %x, %t : tensor<4xf32>
  %l = memopt.reduce_sum %y dims [0] : tensor<4xf32> to tensor<f32>
  return %l : tensor<f32>
}
