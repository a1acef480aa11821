// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-accumulate=micro-batches=2 --memopt-bufferize | FileCheck %s
// RUN: memopt-opt %s --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-accumulate=micro-batches=2 --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan --convert-memopt-to-emitc | memopt-translate --memopt-to-cpp > %t.cpp
// RUN: FileCheck %s --check-prefix=CPP < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -I%memopt_src_root/runtime/include %t.cpp

// The micro-batch loop on buffers: the accumulators are allocated before the
// loop and updated in place by its last kernels; the micro-batches are views
// of the arguments at a dynamic offset; body values are allocated and freed
// inside the body. In C++ the loop is a for loop, the views are offset
// pointers, and each micro-batch's dropout draws its own mask (offset
// i * numel).

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w: tensor<3x4xf32> {memopt.role = "param", memopt.name = "fc.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w transpose_rhs {memopt.scope = "fc"} : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
  %1 = memopt.dropout %0 p 1.0e-01 seed 0 stream 1 {memopt.scope = "fc"} : tensor<8x3xf32>
  %loss = memopt.cross_entropy %1, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:arg0]]: memref<8x4xf32>
// CHECK: memopt.kernel "memopt.label_count"
// CHECK: memopt.kernel "memopt.constant" outs(%[[LOSS:.*]] : memref<f32>) with {value = dense<0.000000e+00>
// CHECK: memopt.kernel "memopt.constant" outs(%[[GRAD:.*]] : memref<3x4xf32>) with {value = dense<0.000000e+00>
// CHECK: scf.for %[[IV:.*]] = %{{.*}} to %{{.*}} step
// CHECK:   %[[ROWS:.*]] = arith.muli %[[IV]], %{{.*}} : index
// CHECK:   %[[ELEMS:.*]] = arith.muli %[[ROWS]], %{{.*}} : index
// CHECK:   %[[OFF:.*]] = arith.addi %{{.*}}, %[[ELEMS]] : index
// CHECK:   %[[XS:.*]] = memref.reinterpret_cast %[[X]] to offset: [%[[OFF]]], sizes: [4, 4], strides: [4, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1], offset: ?>>
// CHECK:   %[[H:.*]] = memref.alloc() : memref<4x3xf32>
// CHECK:   memopt.kernel "memopt.matmul" ins(%[[XS]], %{{.*}}) outs(%[[H]] : memref<4x3xf32>)
// CHECK:   memopt.kernel "memopt.add" ins(%[[LOSS]], %{{.*}}) outs(%[[LOSS]] : memref<f32>)
// CHECK:   %[[G:.*]] = memref.alloc() : memref<3x4xf32>
// CHECK:   memopt.kernel "memopt.matmul" {{.*}} outs(%[[G]] : memref<3x4xf32>)
// CHECK:   memopt.kernel "memopt.add" ins(%[[GRAD]], %[[G]] : {{.*}}) outs(%[[GRAD]] : memref<3x4xf32>)
// CHECK:   memref.dealloc %[[G]]
// CHECK: } {memopt.micro_batches = 2 : i64}
// CHECK: memopt.kernel "memopt.sgd_update" ins(%{{.*}}, %[[GRAD]], %{{.*}})
// CHECK: memref.dealloc %[[GRAD]]
// CHECK: memopt.kernel "memopt.reshape" ins(%[[LOSS]] : memref<f32>) outs(%{{.*}} : memref<f32>)

// CPP: memopt_label_count(
// CPP: for (size_t [[I:i[0-9]+]] = {{.*}}) {
// CPP:   float* [[XS:v[0-9]+]] = {{v[0-9]+}} + {{v[0-9]+}};
// CPP:   memopt_matmul({{v[0-9]+}}, MEMOPT_F32, [[XS]],
// CPP:   size_t [[OFF:v[0-9]+]] = [[I]] * {{v[0-9]+}};
// CPP:   memopt_dropout({{.*}}, 12, {{.*}}, 0, 1, [[OFF]]);
// CPP:   memopt_cross_entropy({{.*}}, MEMOPT_REDUCTION_SUM, 0.0e+00);
// CPP: }
// CPP: memopt_sgd_update(
