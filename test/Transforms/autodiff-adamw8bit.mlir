// RUN: memopt-opt %s --memopt-autodiff="state-bits=8" | FileCheck %s
// RUN: not memopt-opt %s --memopt-autodiff="optimizer=sgd state-bits=8" 2>&1 | FileCheck %s --check-prefix=SGD
// RUN: not memopt-opt %s --memopt-autodiff="state-bits=4" 2>&1 | FileCheck %s --check-prefix=BITS

// 8-bit AdamW: a parameter of at least 4096 elements keeps each moment as
// one packed byte tensor (64 x 64 = 4096 codes, then 16 blocks of 256 with
// a 4-byte absmax each: 4160 bytes); a smaller one keeps f32 moments.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x64xf32> {memopt.name = "big", memopt.role = "param"}, %[[B:[^:]*]]: tensor<64xf32> {memopt.name = "small", memopt.role = "param"},
// CHECK-SAME: %[[WM:[^:]*]]: tensor<4160xi8> {memopt.name = "optimizer.big.exp_avg", memopt.role = "optim"},
// CHECK-SAME: %[[WV:[^:]*]]: tensor<4160xi8> {memopt.name = "optimizer.big.exp_avg_sq", memopt.role = "optim"},
// CHECK-SAME: %[[BM:[^:]*]]: tensor<64xf32> {memopt.name = "optimizer.small.exp_avg", memopt.role = "optim"},
// CHECK-SAME: %[[BV:[^:]*]]: tensor<64xf32> {memopt.name = "optimizer.small.exp_avg_sq", memopt.role = "optim"},
// CHECK-DAG: %{{.*}}, %{{.*}}, %{{.*}} = memopt.adamw_update %[[W]], %{{.*}}, %[[WM]], %[[WV]] step %{{.*}} : tensor<64x64xf32> state tensor<4160xi8>
// CHECK-DAG: %{{.*}}, %{{.*}}, %{{.*}} = memopt.adamw_update %[[B]], %{{.*}}, %[[BM]], %[[BV]] step %{{.*}} : tensor<64xf32>{{$}}

// SGD: error: --memopt-autodiff option 'state-bits' is 8, expected 32, or 8 with adamw
// BITS: error: --memopt-autodiff option 'state-bits' is 4, expected 32, or 8 with adamw
func.func @loss(%x: tensor<8x64xf32> {memopt.role = "input", memopt.name = "x"},
                %w: tensor<64x64xf32> {memopt.role = "param", memopt.name = "big"},
                %b: tensor<64xf32> {memopt.role = "param", memopt.name = "small"}) -> tensor<f32> attributes {memopt.loss} {
  %y = memopt.matmul %x, %w transpose_rhs : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32>
  %bb = memopt.broadcast %b dims [1] : tensor<64xf32> to tensor<8x64xf32>
  %z = memopt.add %y, %bb : tensor<8x64xf32>
  %s = memopt.reduce_sum %z dims [0, 1] : tensor<8x64xf32> to tensor<f32>
  return %s : tensor<f32>
}
