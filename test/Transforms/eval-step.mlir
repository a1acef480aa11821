// RUN: memopt-opt %s --memopt-eval-step | FileCheck %s
// RUN: memopt-opt %s --memopt-eval-step --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan | FileCheck %s --check-prefix=PLANNED

// --memopt-eval-step: model.eval() under torch.no_grad(). Batch norm
// normalises with the running statistics (scale = w / sqrt(var + eps),
// shift = b - mean * scale, x * scale + shift) and returns them unchanged;
// dropout is the identity; the function returns the loss and then every
// param and state argument itself, so bufferization updates nothing.

// CHECK-LABEL: func.func @eval_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4x4xf32>
// CHECK-SAME: %[[W:[^:]*]]: tensor<3xf32>
// CHECK-SAME: %[[B:[^:]*]]: tensor<3xf32>
// CHECK-SAME: %[[RM:[^:]*]]: tensor<3xf32>
// CHECK-SAME: %[[RV:[^:]*]]: tensor<3xf32>
// CHECK-SAME: attributes {memopt.eval_step}
// CHECK-NEXT: %[[VE:.*]] = memopt.add_scalar %[[RV]], 1.000000e-05 {memopt.scope = "bn"}
// CHECK-NEXT: %[[INV:.*]] = memopt.rsqrt %[[VE]]
// CHECK-NEXT: %[[SCALE:.*]] = memopt.mul %[[W]], %[[INV]]
// CHECK-NEXT: %[[MS:.*]] = memopt.mul %[[RM]], %[[SCALE]]
// CHECK-NEXT: %[[SHIFT:.*]] = memopt.sub %[[B]], %[[MS]]
// CHECK-NEXT: %[[SB:.*]] = memopt.broadcast %[[SCALE]] dims [1]
// CHECK-NEXT: %[[XS:.*]] = memopt.mul %[[X]], %[[SB]]
// CHECK-NEXT: %[[TB:.*]] = memopt.broadcast %[[SHIFT]] dims [1]
// CHECK-NEXT: %[[Y:.*]] = memopt.add %[[XS]], %[[TB]]
// CHECK-NOT: memopt.dropout
// CHECK-NEXT: %[[L:.*]] = memopt.reduce_sum %[[Y]]
// CHECK-NEXT: return %[[L]], %[[W]], %[[B]], %[[RM]], %[[RV]] :

// Planned: the loss is the only argument written.
// PLANNED-LABEL: func.func @eval_step
// PLANNED-SAME: memopt.arena_bytes
// PLANNED-NOT: memref.copy
// PLANNED: return

func.func @forward(
    %x: tensor<2x3x4x4xf32> {memopt.role = "input", memopt.name = "x"},
    %w: tensor<3xf32> {memopt.role = "param", memopt.name = "bn.weight"},
    %b: tensor<3xf32> {memopt.role = "param", memopt.name = "bn.bias"},
    %rm: tensor<3xf32> {memopt.role = "state", memopt.name = "bn.running_mean"},
    %rv: tensor<3xf32> {memopt.role = "state", memopt.name = "bn.running_var"})
    -> (tensor<f32>, tensor<3xf32>, tensor<3xf32>) attributes {memopt.loss} {
  %y, %mean, %rstd, %rm2, %rv2 = memopt.batch_norm %x, %w, %b, %rm, %rv eps 1.0e-05 momentum 1.0e-01 {memopt.scope = "bn"} : tensor<2x3x4x4xf32>, tensor<3xf32>
  %d = memopt.dropout %y p 1.0e-01 seed 0 stream 1 : tensor<2x3x4x4xf32>
  %l = memopt.reduce_sum %d dims [0, 1, 2, 3] : tensor<2x3x4x4xf32> to tensor<f32>
  return %l, %rm2, %rv2 : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}
