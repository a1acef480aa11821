// RUN: memopt-opt %s --convert-memopt-to-emitc | memopt-translate --memopt-to-cpp > %t.cpp
// RUN: c++ -std=c++17 %host_cxxflags -c -I%memopt_src_root/runtime/include %t.cpp -o %t.o
// RUN: c++ -std=c++17 %host_cxxflags -I%memopt_src_root/runtime/include %S/Inputs/linear-sgd-main.cpp %t.o %memopt_obj_root/lib/libmemopt_runtime_host.a %host_runtime_libs -o %t.exe
// RUN: %t.exe | FileCheck %s

// One SGD step of a linear layer with a constant bias and an MSE loss,
// lowered to C++, compiled against the host runtime and run. With
// x = [[1, 2], [3, 4]], w = [[0.5, -1]], bias = [[0.25], [0.75]],
// y = [[0], [1]], momentum buffer [1, -1], lr 0.1 and momentum 0.9:
//   h = x w^T + bias = [-1.25, -1.75], h - y = [-1.25, -2.75]
//   loss = (1.5625 + 7.5625) / 2 = 4.5625
//   dh = 2 (h - y) / 2 = [-1.25, -2.75], dw = dh^T x = [-9.5, -13.5]
//   buf' = 0.9 buf + dw = [-8.6, -14.4], w' = w - 0.1 buf' = [1.36, 0.44]

// CHECK: loss 4.5625
// CHECK-NEXT: weight 1.36 0.44
// CHECK-NEXT: momentum_buffer -8.6 -14.4
// CHECK-NEXT: step 1
// CHECK-NEXT: ok

func.func @train_step(%x: memref<2x2xf32> {memopt.role = "input", memopt.name = "x"},
                      %y: memref<2x1xf32> {memopt.role = "label", memopt.name = "y"},
                      %w: memref<1x2xf32> {memopt.role = "param", memopt.name = "fc.weight"},
                      %buf: memref<1x2xf32> {memopt.role = "optim", memopt.name = "optimizer.fc.weight.momentum_buffer"},
                      %t: memref<i64> {memopt.role = "optim", memopt.name = "optimizer.step"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 768 : i64, memopt.train_step} {
  %h = memref.alloc() {memopt.offset = 0 : i64} : memref<2x1xf32>
  memopt.kernel "memopt.matmul" ins(%x, %w : memref<2x2xf32>, memref<1x2xf32>) outs(%h : memref<2x1xf32>) with {transpose_rhs}
  %bias = memref.alloc() {memopt.offset = 256 : i64} : memref<2x1xf32>
  memopt.kernel "memopt.constant" outs(%bias : memref<2x1xf32>) with {value = dense<[[0.25], [0.75]]> : tensor<2x1xf32>}
  memopt.kernel "memopt.add" ins(%h, %bias : memref<2x1xf32>, memref<2x1xf32>) outs(%h : memref<2x1xf32>) with {}
  memref.dealloc %bias : memref<2x1xf32>
  memopt.kernel "memopt.mse_loss" ins(%h, %y : memref<2x1xf32>, memref<2x1xf32>) outs(%loss : memref<f32>) with {}
  %one = memref.alloc() {memopt.offset = 256 : i64} : memref<f32>
  memopt.kernel "memopt.constant" outs(%one : memref<f32>) with {value = dense<1.0> : tensor<f32>}
  %dh = memref.alloc() {memopt.offset = 512 : i64} : memref<2x1xf32>
  memopt.kernel "memopt.mse_loss_grad" ins(%h, %y, %one : memref<2x1xf32>, memref<2x1xf32>, memref<f32>) outs(%dh : memref<2x1xf32>) with {}
  memref.dealloc %one : memref<f32>
  memref.dealloc %h : memref<2x1xf32>
  %dw = memref.alloc() {memopt.offset = 0 : i64} : memref<1x2xf32>
  memopt.kernel "memopt.matmul" ins(%dh, %x : memref<2x1xf32>, memref<2x2xf32>) outs(%dw : memref<1x2xf32>) with {transpose_lhs}
  memref.dealloc %dh : memref<2x1xf32>
  memopt.kernel "memopt.increment" ins(%t : memref<i64>) outs(%t : memref<i64>) with {}
  memopt.kernel "memopt.sgd_update" ins(%w, %dw, %buf : memref<1x2xf32>, memref<1x2xf32>, memref<1x2xf32>) outs(%w, %buf : memref<1x2xf32>, memref<1x2xf32>) with {lr = 1.0e-01 : f64, momentum = 9.0e-01 : f64, weight_decay = 0.0 : f64}
  memref.dealloc %dw : memref<1x2xf32>
  return
}
