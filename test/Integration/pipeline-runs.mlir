// RUN: memopt-opt %s --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan --convert-memopt-to-emitc | memopt-translate --memopt-to-cpp > %t.cpp
// RUN: c++ -std=c++17 %host_cxxflags -I%memopt_src_root/runtime/include %S/Inputs/linear-sgd-main.cpp %t.cpp %memopt_obj_root/lib/libmemopt_runtime_host.a %host_runtime_libs -o %t.exe
// RUN: %t.exe | FileCheck %s

// The model of codegen-runs.mlir, from tensors through the whole code
// generation pipeline: bufferization, buffer planning, EmitC, C++. Same
// numbers (worked out in codegen-runs.mlir).

// CHECK: loss 4.5625
// CHECK-NEXT: weight 1.36 0.44
// CHECK-NEXT: momentum_buffer -8.6 -14.4
// CHECK-NEXT: step 1
// CHECK-NEXT: ok

func.func @train_step(%x: tensor<2x2xf32> {memopt.role = "input", memopt.name = "x"},
                      %y: tensor<2x1xf32> {memopt.role = "label", memopt.name = "y"},
                      %w: tensor<1x2xf32> {memopt.role = "param", memopt.name = "fc.weight"},
                      %buf: tensor<1x2xf32> {memopt.role = "optim", memopt.name = "optimizer.fc.weight.momentum_buffer"},
                      %t: tensor<i64> {memopt.role = "optim", memopt.name = "optimizer.step"})
    -> (tensor<f32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<i64>) attributes {memopt.train_step} {
  %mm = memopt.matmul %x, %w transpose_rhs : tensor<2x2xf32>, tensor<1x2xf32> -> tensor<2x1xf32>
  %bias = memopt.constant dense<[[0.25], [0.75]]> : tensor<2x1xf32>
  %h = memopt.add %mm, %bias : tensor<2x1xf32>
  %l = memopt.mse_loss %h, %y : tensor<2x1xf32>
  %one = memopt.constant dense<1.0> : tensor<f32>
  %dh = memopt.mse_loss_grad %h, %y, %one : tensor<2x1xf32>
  %dw = memopt.matmul %dh, %x transpose_lhs : tensor<2x1xf32>, tensor<2x2xf32> -> tensor<1x2xf32>
  %t1 = memopt.increment %t
  %w2, %b2 = memopt.sgd_update %w, %dw, %buf lr 1.0e-01 momentum 9.0e-01 weight_decay 0.0 : tensor<1x2xf32>
  return %l, %w2, %b2, %t1 : tensor<f32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<i64>
}
