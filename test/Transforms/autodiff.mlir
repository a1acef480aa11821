// RUN: memopt-opt %s -split-input-file --memopt-autodiff="optimizer=sgd lr=0.5 momentum=0.9 weight-decay=0" | FileCheck %s

// The gradients of a weight used twice (tied embedding and LM head) are
// summed; backward ops carry the scope of the op they differentiate; inputs
// and labels get no gradient.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<2x3xi64>
// CHECK-SAME: %[[T:[^:]*]]: tensor<2x3xi64>
// CHECK-SAME: %[[W:[^:]*]]: tensor<5x4xf32> {memopt.name = "wte.weight", memopt.role = "param"}
// CHECK-SAME: %[[BUF:[^:]*]]: tensor<5x4xf32> {memopt.name = "optimizer.wte.weight.momentum_buffer", memopt.role = "optim"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {memopt.name = "optimizer.step", memopt.role = "optim"}
// CHECK-SAME: -> (tensor<f32>, tensor<5x4xf32>, tensor<5x4xf32>, tensor<i64>) attributes {memopt.train_step}
// CHECK: %[[E:.*]] = memopt.embedding %[[W]], %[[IDS]]
// CHECK: %[[LOGITS:.*]] = memopt.matmul %[[E]], %[[W]] transpose_rhs
// CHECK: %[[LOSS:.*]] = memopt.cross_entropy %[[LOGITS]], %[[T]] ignore_index 0
// CHECK: %[[ONE:.*]] = memopt.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = memopt.cross_entropy_grad %[[LOGITS]], %[[T]], %[[ONE]] ignore_index 0
// CHECK: %[[DE:.*]] = memopt.matmul %[[DLOGITS]], %[[W]] {memopt.scope = "lm_head"} : tensor<2x3x5xf32>, tensor<5x4xf32> -> tensor<2x3x4xf32>
// CHECK: %[[ROWS:.*]] = memopt.reshape %[[E]] {memopt.scope = "lm_head"} : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK: %[[GROWS:.*]] = memopt.reshape %[[DLOGITS]] {memopt.scope = "lm_head"} : tensor<2x3x5xf32> to tensor<6x5xf32>
// CHECK: %[[DW_HEAD:.*]] = memopt.matmul %[[GROWS]], %[[ROWS]] transpose_lhs {memopt.scope = "lm_head"} : tensor<6x5xf32>, tensor<6x4xf32> -> tensor<5x4xf32>
// CHECK: %[[DW_EMB:.*]] = memopt.embedding_grad %[[DE]], %[[IDS]] {memopt.scope = "wte"} : tensor<2x3x4xf32>, tensor<2x3xi64> -> tensor<5x4xf32>
// CHECK: %[[DW:.*]] = memopt.add %[[DW_HEAD]], %[[DW_EMB]] {memopt.scope = "wte"}
// CHECK: %[[STEP1:.*]] = memopt.increment %[[STEP]]
// CHECK: %[[NEW_W:.*]], %[[NEW_BUF:.*]] = memopt.sgd_update %[[W]], %[[DW]], %[[BUF]] lr 5.000000e-01 momentum 9.000000e-01 weight_decay 0.000000e+00
// CHECK: return %[[LOSS]], %[[NEW_W]], %[[NEW_BUF]], %[[STEP1]]
// CHECK-NOT: func.func @tied
func.func @tied(%ids: tensor<2x3xi64> {memopt.role = "input", memopt.name = "idx", memopt.batch_dim = 0 : i64},
                %t: tensor<2x3xi64> {memopt.role = "label", memopt.name = "targets", memopt.batch_dim = 0 : i64},
                %w: tensor<5x4xf32> {memopt.role = "param", memopt.name = "wte.weight"}) -> tensor<f32> attributes {memopt.loss} {
  %e = memopt.embedding %w, %ids {memopt.scope = "wte"} : tensor<5x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %logits = memopt.matmul %e, %w transpose_rhs {memopt.scope = "lm_head"} : tensor<2x3x4xf32>, tensor<5x4xf32> -> tensor<2x3x5xf32>
  %l = memopt.cross_entropy %logits, %t ignore_index 0 : tensor<2x3x5xf32>, tensor<2x3xi64>
  return %l : tensor<f32>
}

// -----

// Elementwise chain: d(l/r) and the product rule; the input's own gradient
// is not computed.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32> {memopt.batch_dim = 0 : i64, memopt.name = "x", memopt.role = "input"}, %[[W:[^:]*]]: tensor<4xf32>
// CHECK: %[[A:.*]] = memopt.mul %[[X]], %[[W]]
// CHECK: %[[B:.*]] = memopt.div %[[A]], %[[W]]
// CHECK: %[[C:.*]] = memopt.exp %[[B]]
// CHECK: %[[ONE:.*]] = memopt.constant
// CHECK: %[[DC:.*]] = memopt.mse_loss_grad %[[C]], %[[X]], %[[ONE]]
// CHECK: %[[DB:.*]] = memopt.mul %[[DC]], %[[C]]
// CHECK: %[[DA:.*]] = memopt.div %[[DB]], %[[W]]
// CHECK: %[[T:.*]] = memopt.mul %[[DA]], %[[B]]
// CHECK: %[[DW_DIV:.*]] = memopt.neg %[[T]]
// CHECK: %[[DW_MUL:.*]] = memopt.mul %[[DA]], %[[X]]
// CHECK: %[[DW:.*]] = memopt.add %[[DW_DIV]], %[[DW_MUL]]
// CHECK-NOT: memopt.neg %[[DC]]
// CHECK: memopt.sgd_update %[[W]], %[[DW]]
func.func @elementwise(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                       %w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"}) -> tensor<f32> attributes {memopt.loss} {
  %a = memopt.mul %x, %w : tensor<4xf32>
  %b = memopt.div %a, %w : tensor<4xf32>
  %c = memopt.exp %b : tensor<4xf32>
  %d = memopt.mse_loss %c, %x : tensor<4xf32>
  return %d : tensor<f32>
}

// -----

// Layer norm reads its saved statistics; dropout's backward is the same
// counter-based dropout; a mean spreads 1/count over its input.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x8xf32> {memopt.batch_dim = 0 : i64, memopt.name = "x", memopt.role = "input"}, %[[G:[^:]*]]: tensor<8xf32> {memopt.name = "ln.weight", memopt.role = "param"}, %[[B:[^:]*]]: tensor<8xf32>
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = memopt.layer_norm %[[X]], %[[G]], %[[B]]
// CHECK: %[[S:.*]] = memopt.softmax %[[Y]] dim 1
// CHECK: %[[D:.*]] = memopt.dropout %[[S]] p 1.000000e-01 seed 0 stream 2
// CHECK: %[[ONE:.*]] = memopt.constant
// CHECK: %[[SPREAD:.*]] = memopt.broadcast %[[ONE]] dims [] : tensor<f32> to tensor<2x8xf32>
// CHECK: %[[DD:.*]] = memopt.mul_scalar %[[SPREAD]], 6.250000e-02
// CHECK: %[[DS:.*]] = memopt.dropout %[[DD]] p 1.000000e-01 seed 0 stream 2
// CHECK: %[[DY:.*]] = memopt.softmax_grad %[[S]], %[[DS]] dim 1
// CHECK: %{{.*}}, %[[DG:.*]], %[[DB:.*]] = memopt.layer_norm_grad %[[DY]], %[[X]], %[[G]], %[[MEAN]], %[[RSTD]] {memopt.scope = "ln"}
// CHECK: memopt.sgd_update %[[G]], %[[DG]]
// CHECK: memopt.sgd_update %[[B]], %[[DB]]
func.func @norm_softmax_dropout(%x: tensor<2x8xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                                %g: tensor<8xf32> {memopt.role = "param", memopt.name = "ln.weight"},
                                %b: tensor<8xf32> {memopt.role = "param", memopt.name = "ln.bias"}) -> tensor<f32> attributes {memopt.loss} {
  %y, %m, %r = memopt.layer_norm %x, %g, %b eps 1.0e-05 {memopt.scope = "ln"} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2xf32>
  %s = memopt.softmax %y dim 1 : tensor<2x8xf32>
  %d = memopt.dropout %s p 0.1 seed 0 stream 2 : tensor<2x8xf32>
  %t = memopt.reduce_mean %d dims [0, 1] : tensor<2x8xf32> to tensor<f32>
  return %t : tensor<f32>
}

// -----

// Batch norm: running statistics are returned as state, not differentiated;
// max pooling routes the gradient through the window maxima.

// CHECK-LABEL: func.func @train_step
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[RSTD:.*]], %[[RM:.*]], %[[RV:.*]] = memopt.batch_norm
// CHECK: %[[P:.*]] = memopt.max_pool2d %[[Y]]
// CHECK: %[[DY:.*]] = memopt.max_pool2d_grad %{{.*}}, %[[Y]] kernel [2, 2] strides [2, 2]
// CHECK: %{{.*}}, %[[DW:.*]], %[[DB:.*]] = memopt.batch_norm_grad %[[DY]], %{{.*}}, %{{.*}}, %[[MEAN]], %[[RSTD]]
// CHECK: %[[NW:.*]], %[[NWB:.*]] = memopt.sgd_update %{{.*}}, %[[DW]]
// CHECK: %[[NB:.*]], %[[NBB:.*]] = memopt.sgd_update %{{.*}}, %[[DB]]
// CHECK: return %{{.*}}, %[[NW]], %[[NB]], %[[RM]], %[[RV]], %[[NWB]], %[[NBB]], %{{.*}} :
func.func @batch_norm_state(%x: tensor<2x3x4x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                            %w: tensor<3xf32> {memopt.role = "param", memopt.name = "bn.weight"},
                            %b: tensor<3xf32> {memopt.role = "param", memopt.name = "bn.bias"},
                            %rm: tensor<3xf32> {memopt.role = "state", memopt.name = "bn.running_mean"},
                            %rv: tensor<3xf32> {memopt.role = "state", memopt.name = "bn.running_var"}) -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>) attributes {memopt.loss} {
  %y, %m, %r, %rm2, %rv2 = memopt.batch_norm %x, %w, %b, %rm, %rv eps 1.0e-05 momentum 0.1 {memopt.scope = "bn"} : tensor<2x3x4x4xf32>, tensor<3xf32>
  %p = memopt.max_pool2d %y kernel [2, 2] strides [2, 2] : tensor<2x3x4x4xf32> to tensor<2x3x2x2xf32>
  %s = memopt.reduce_sum %p dims [0, 1, 2, 3] : tensor<2x3x2x2xf32> to tensor<f32>
  return %s, %rm2, %rv2 : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// A parameter the loss does not depend on has no gradient: as torch.optim
// with a None gradient, it and its momentum buffer are returned unchanged
// (no update, so no weight decay either).

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[UNUSED:[^:]*]]: tensor<2xf32> {memopt.name = "unused", memopt.role = "param"}
// CHECK-SAME: %[[BUF:[^:]*]]: tensor<2xf32> {memopt.name = "optimizer.unused.momentum_buffer", memopt.role = "optim"}
// CHECK-NOT: memopt.sgd_update %[[UNUSED]]
// CHECK: return %{{.*}}, %{{.*}}, %[[UNUSED]], %{{.*}}, %[[BUF]], %{{.*}} :
func.func @unused(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
                  %w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"},
                  %u: tensor<2xf32> {memopt.role = "param", memopt.name = "unused"}) -> tensor<f32> attributes {memopt.loss} {
  %l = memopt.mse_loss %w, %x : tensor<4xf32>
  return %l : tensor<f32>
}
