// The attributes the memopt dialect gives meaning to round-trip: roles, names
// and batch dimensions on function arguments, memopt.loss on the function,
// memopt.scope on ops. (The printer sorts each dictionary by name.)

// RUN: memopt-opt %s --verify-roundtrip | FileCheck %s
// RUN: memopt-opt %s --mlir-print-op-generic | memopt-opt | FileCheck %s

// Every role, a batch dimension other than 0, and a loss function that
// returns the new value of its state after the loss.
// CHECK-LABEL: func.func @loss_with_state(
// CHECK-SAME:    %[[X:.*]]: tensor<8x4xf32> {memopt.batch_dim = 0 : i64, memopt.name = "x", memopt.role = "input"},
// CHECK-SAME:    %[[TOKENS:.*]]: tensor<16x8xi64> {memopt.batch_dim = 1 : i64, memopt.name = "tokens", memopt.role = "input"},
// CHECK-SAME:    %[[Y:.*]]: tensor<8xi64> {memopt.batch_dim = 0 : i64, memopt.name = "y", memopt.role = "label"},
// CHECK-SAME:    %[[W:.*]]: tensor<3x4xf32> {memopt.name = "encoder.layers.0.linear.weight", memopt.role = "param"},
// CHECK-SAME:    %[[RM:.*]]: tensor<4xf32> {memopt.name = "bn.running_mean", memopt.role = "state"})
// CHECK-SAME:    -> (tensor<f32>, tensor<4xf32>) attributes {memopt.loss} {
// CHECK:         %[[LOGITS:.*]] = memopt.matmul %[[X]], %[[W]] transpose_rhs {memopt.scope = "encoder.layers.0.linear"} : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
// CHECK:         %[[LOSS:.*]] = memopt.cross_entropy %[[LOGITS]], %[[Y]] {memopt.scope = ""} : tensor<8x3xf32>, tensor<8xi64>
// CHECK:         %[[NEW_RM:.*]] = memopt.mul_scalar %[[RM]], 9.000000e-01 {memopt.scope = "bn"} : tensor<4xf32>
// CHECK:         return %[[LOSS]], %[[NEW_RM]] : tensor<f32>, tensor<4xf32>
func.func @loss_with_state(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %tokens: tensor<16x8xi64> {memopt.role = "input", memopt.name = "tokens", memopt.batch_dim = 1 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "encoder.layers.0.linear.weight"},
    %rm: tensor<4xf32> {memopt.role = "state", memopt.name = "bn.running_mean"})
    -> (tensor<f32>, tensor<4xf32>) attributes {memopt.loss} {
  %logits = memopt.matmul %x, %w transpose_rhs {memopt.scope = "encoder.layers.0.linear"} : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %loss = memopt.cross_entropy %logits, %y {memopt.scope = ""} : tensor<8x3xf32>, tensor<8xi64>
  %new_rm = memopt.mul_scalar %rm, 9.000000e-01 {memopt.scope = "bn"} : tensor<4xf32>
  return %loss, %new_rm : tensor<f32>, tensor<4xf32>
}

// A scope on an op with several results sits in its attribute dictionary,
// after the op's own attributes.
// CHECK-LABEL: func.func @scope_on_multi_result_op(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x64xf32>, %[[W:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>) -> tensor<2x8x64xf32> {
// CHECK:         %[[Y:.*]], %{{.*}}, %{{.*}} = memopt.layer_norm %[[X]], %[[W]], %[[B]] eps 1.000000e-05 {memopt.scope = "transformer.h.3.ln_1"} : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8xf32>
// CHECK:         %[[D:.*]] = memopt.dropout %[[Y]] p 1.000000e-01 seed 0 stream 7 {memopt.scope = "transformer.h.3.attn.resid_dropout"} : tensor<2x8x64xf32>
// CHECK:         return %[[D]] : tensor<2x8x64xf32>
func.func @scope_on_multi_result_op(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<2x8x64xf32> {
  %y, %mean, %rstd = memopt.layer_norm %x, %w, %b eps 1.000000e-05 {memopt.scope = "transformer.h.3.ln_1"} : tensor<2x8x64xf32>, tensor<64xf32> -> tensor<2x8xf32>
  %d = memopt.dropout %y p 1.000000e-01 seed 0 stream 7 {memopt.scope = "transformer.h.3.attn.resid_dropout"} : tensor<2x8x64xf32>
  return %d : tensor<2x8x64xf32>
}

// Outside a loss function the annotations are optional, one at a time; a
// function without memopt.loss prints without it.
// CHECK-LABEL: func.func @partial_annotations(
// CHECK-SAME:    %[[X:.*]]: tensor<4xf32> {memopt.name = "x"},
// CHECK-SAME:    %[[W:.*]]: tensor<4xf32> {memopt.role = "param"},
// CHECK-SAME:    %[[Z:.*]]: tensor<4xf32>) -> tensor<4xf32> {{[{]$}}
// CHECK:         %[[M:.*]] = memopt.mul %[[X]], %[[W]] : tensor<4xf32>
// CHECK:         %[[A:.*]] = memopt.add %[[M]], %[[Z]] : tensor<4xf32>
// CHECK:         return %[[A]] : tensor<4xf32>
func.func @partial_annotations(
    %x: tensor<4xf32> {memopt.name = "x"},
    %w: tensor<4xf32> {memopt.role = "param"},
    %z: tensor<4xf32>) -> tensor<4xf32> {
  %m = memopt.mul %x, %w : tensor<4xf32>
  %a = memopt.add %m, %z : tensor<4xf32>
  return %a : tensor<4xf32>
}

// Argument attributes on a declaration.
// CHECK-LABEL: func.func private @declaration(
// CHECK-SAME:    tensor<4x4xf32> {memopt.name = "fc.weight", memopt.role = "param"},
// CHECK-SAME:    tensor<2x4xf32> {memopt.batch_dim = 0 : i64, memopt.name = "x", memopt.role = "input"}) -> tensor<f32>{{$}}
func.func private @declaration(
    tensor<4x4xf32> {memopt.role = "param", memopt.name = "fc.weight"},
    tensor<2x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64}) -> tensor<f32>
