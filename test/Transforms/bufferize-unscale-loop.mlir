// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-accumulate=micro-batches=2 --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan | FileCheck %s
// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-accumulate=micro-batches=2 --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan --convert-memopt-to-emitc | memopt-translate --memopt-to-cpp > %t.cpp
// RUN: FileCheck %s --check-prefix=CPP < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -I%memopt_src_root/runtime/include %t.cpp
// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-accumulate=micro-batches=2 --memopt-bufferize=reuse=false | FileCheck %s --check-prefix=OFF

// Dynamic loss scaling with gradient accumulation: the unscale runs once,
// after the micro-batch loop, on the f32 accumulators, and writes the
// unscaled gradients back into them (they die there); the updates read
// them from the accumulators, which are freed after them. The plan passes
// the independent check, and in C++ the unscale's result pointers are its
// gradient pointers.

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "fc.weight"},
    %b: tensor<3xf32> {memopt.role = "param", memopt.name = "fc.bias"})
    -> tensor<f32> attributes {memopt.loss, memopt.loss_scale = {mode = "dynamic", scale = 1024.0 : f64, growth_factor = 2.0 : f64, backoff_factor = 0.5 : f64, growth_interval = 3 : i64}} {
  %wl = memopt.cast %w : tensor<3x4xf32> to tensor<3x4xf16>
  %xl = memopt.cast %x : tensor<8x4xf32> to tensor<8x4xf16>
  %0 = memopt.matmul %xl, %wl transpose_rhs {memopt.scope = "fc"} : tensor<8x4xf16>, tensor<3x4xf16> -> tensor<8x3xf16>
  %1 = memopt.cast %0 : tensor<8x3xf16> to tensor<8x3xf32>
  %bb = memopt.broadcast %b dims [1] : tensor<3xf32> to tensor<8x3xf32>
  %2 = memopt.add %1, %bb : tensor<8x3xf32>
  %loss = memopt.cross_entropy %2, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:arg2]]: memref<3x4xf32>
// CHECK-SAME: %[[B:arg3]]: memref<3xf32>
// CHECK-SAME: %[[SCALE:arg7]]: memref<f32> {memopt.name = "optimizer.loss_scale"
// CHECK: memopt.kernel "memopt.constant" outs(%[[GB:.*]] : memref<3xf32>) with {value = dense<0.000000e+00>
// CHECK: memopt.kernel "memopt.constant" outs(%[[GW:.*]] : memref<3x4xf32>) with {value = dense<0.000000e+00>
// CHECK: scf.for
// CHECK:   memopt.kernel "memopt.add" ins(%[[GB]], %{{.*}}) outs(%[[GB]] : memref<3xf32>)
// CHECK:   memopt.kernel "memopt.add" ins(%[[GW]], %{{.*}}) outs(%[[GW]] : memref<3x4xf32>)
// CHECK: } {memopt.micro_batches = 2 : i64}
// CHECK: %[[INF:.*]] = memref.alloc() {memopt.offset = {{[0-9]+}} : i64} : memref<i1>
// CHECK-NEXT: memopt.kernel "memopt.unscale" ins(%[[SCALE]], %[[GW]], %[[GB]] : memref<f32>, memref<3x4xf32>, memref<3xf32>) outs(%[[GW]], %[[GB]], %[[INF]] : memref<3x4xf32>, memref<3xf32>, memref<i1>)
// CHECK-NEXT: memopt.kernel "memopt.increment"
// CHECK-NEXT: memopt.kernel "memopt.sgd_update" ins(%[[W]], %[[GW]], %{{.*}}, %[[INF]] :
// CHECK-NEXT: memref.dealloc %[[GW]]
// CHECK-NEXT: memopt.kernel "memopt.sgd_update" ins(%[[B]], %[[GB]], %{{.*}}, %[[INF]] :
// CHECK-NEXT: memref.dealloc %[[GB]]

// CPP: const void *[[GRADS:memopt_grads_[0-9]+]][] = {[[GW:v[0-9]+]], [[GB:v[0-9]+]]};
// CPP-NEXT: void *[[RESULTS:memopt_results_[0-9]+]][] = {[[GW]], [[GB]]};
// CPP-NEXT: memopt_unscale({{v[0-9]+}}, {{v[0-9]+}}, 2, {{.*}}, [[GRADS]], [[RESULTS]],

// Without reuse the unscaled gradients get buffers of their own.
// OFF: } {memopt.micro_batches = 2 : i64}
// OFF: %[[UW:.*]] = memref.alloc() : memref<3x4xf32>
// OFF-NEXT: %[[UB:.*]] = memref.alloc() : memref<3xf32>
// OFF-NEXT: %[[INF:.*]] = memref.alloc() : memref<i1>
// OFF-NEXT: memopt.kernel "memopt.unscale" ins({{.*}}) outs(%[[UW]], %[[UB]], %[[INF]] :
// OFF: memopt.kernel "memopt.sgd_update" ins(%{{[^,]*}}, %[[UW]],
// OFF: memopt.kernel "memopt.sgd_update" ins(%{{[^,]*}}, %[[UB]],
