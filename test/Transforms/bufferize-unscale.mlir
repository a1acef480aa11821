// RUN: memopt-opt %s --memopt-bufferize -split-input-file | FileCheck %s
// RUN: memopt-opt %s --memopt-bufferize=reuse=false -split-input-file | FileCheck %s --check-prefix=OFF
// RUN: memopt-opt %s --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan -split-input-file | FileCheck %s --check-prefix=PLAN

// memopt.unscale in place (docs/MixedPrecision.md, "Memory"): result i of
// the unscale goes into the scratch buffer of gradient i when that buffer
// dies at the unscale (runtime.h: results[j] may alias grads[j]), so the
// unscaled gradients do not need a second set of buffers. The optimizer reads
// the unscaled value from the gradient's buffer, which is freed after it.
// Buffer planning and its independent check accept the result.

// CHECK-LABEL: func.func @in_place
// CHECK-SAME: (%[[X:[^:]*]]: memref<4xf32> {{.*}}, %[[W:[^:]*]]: memref<4xf32> {{.*}}, %[[V:[^:]*]]: memref<2x3xf32> {{.*}}, %[[BW:[^:]*]]: memref<4xf32> {{.*}}, %[[BV:[^:]*]]: memref<2x3xf32> {{.*}}, %[[S:[^:]*]]: memref<f32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[DW:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.mul" ins(%[[X]], %[[W]] : {{.*}}) outs(%[[DW]] : memref<4xf32>)
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[DW]] : memref<4xf32>) outs(%[[LOSS]] : memref<f32>)
// CHECK-NEXT: %[[DV:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK-NEXT: memopt.kernel "memopt.constant" outs(%[[DV]] : memref<2x3xf32>)
// CHECK-NEXT: %[[INF:.*]] = memref.alloc() : memref<i1>
// CHECK-NEXT: memopt.kernel "memopt.unscale" ins(%[[S]], %[[DW]], %[[DV]] : memref<f32>, memref<4xf32>, memref<2x3xf32>) outs(%[[DW]], %[[DV]], %[[INF]] : memref<4xf32>, memref<2x3xf32>, memref<i1>)
// CHECK-NEXT: memopt.kernel "memopt.sgd_update" ins(%[[W]], %[[DW]], %[[BW]], %[[INF]] : {{.*}}) outs(%[[W]], %[[BW]] : {{.*}})
// CHECK-NEXT: memref.dealloc %[[DW]] : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.sgd_update" ins(%[[V]], %[[DV]], %[[BV]], %[[INF]] : {{.*}}) outs(%[[V]], %[[BV]] : {{.*}})
// CHECK-DAG: memref.dealloc %[[INF]] : memref<i1>
// CHECK-DAG: memref.dealloc %[[DV]] : memref<2x3xf32>
// CHECK-NEXT: return

// Without reuse every result gets its own buffer.
// OFF-LABEL: func.func @in_place
// OFF: memopt.kernel "memopt.constant"
// OFF-NEXT: %[[UW:.*]] = memref.alloc() : memref<4xf32>
// OFF-NEXT: %[[UV:.*]] = memref.alloc() : memref<2x3xf32>
// OFF-NEXT: %[[INF:.*]] = memref.alloc() : memref<i1>
// OFF-NEXT: memopt.kernel "memopt.unscale" ins({{.*}}) outs(%[[UW]], %[[UV]], %[[INF]] :

// PLAN-LABEL: func.func @in_place
// PLAN-SAME: memopt.arena_bytes = 768 : i64
// PLAN: memopt.kernel "memopt.unscale" ins(%{{[^,]*}}, %[[DW:[^,]*]], %[[DV:[^ ]*]] : {{.*}}) outs(%[[DW]], %[[DV]], %{{[^ ]*}} :

func.func @in_place(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"},
                    %w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"},
                    %v: tensor<2x3xf32> {memopt.role = "param", memopt.name = "v"},
                    %bw: tensor<4xf32> {memopt.role = "optim", memopt.name = "optimizer.w.momentum_buffer"},
                    %bv: tensor<2x3xf32> {memopt.role = "optim", memopt.name = "optimizer.v.momentum_buffer"},
                    %s: tensor<f32> {memopt.role = "optim", memopt.name = "optimizer.loss_scale"})
    -> (tensor<f32>, tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<f32>) attributes {memopt.train_step} {
  %dw = memopt.mul %x, %w : tensor<4xf32>
  %l = memopt.reduce_sum %dw dims [0] : tensor<4xf32> to tensor<f32>
  %dv = memopt.constant dense<1.0> : tensor<2x3xf32>
  %u:2, %inf = memopt.unscale %s, %dw, %dv : tensor<4xf32>, tensor<2x3xf32>
  %w2, %bw2 = memopt.sgd_update %w, %u#0, %bw skip_if %inf lr 1.0e-01 momentum 0.9 weight_decay 0.0 : tensor<4xf32>
  %v2, %bv2 = memopt.sgd_update %v, %u#1, %bv skip_if %inf lr 1.0e-01 momentum 0.9 weight_decay 0.0 : tensor<2x3xf32>
  return %l, %w2, %v2, %bw2, %bv2, %s : tensor<f32>, tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<f32>
}

// -----

// A gradient read again after the unscale keeps its value: its result gets
// a new buffer, while the other gradient, dying there, is unscaled in place.

// CHECK-LABEL: func.func @still_live
// CHECK-SAME: (%[[X:[^:]*]]: memref<4xf32> {{.*}}, %[[W:[^:]*]]: memref<4xf32> {{.*}}, %[[V:[^:]*]]: memref<4xf32> {{.*}}, %[[S:[^:]*]]: memref<f32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK: %[[DW:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.mul" {{.*}} outs(%[[DW]] : memref<4xf32>)
// CHECK-NEXT: %[[DV:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.exp" {{.*}} outs(%[[DV]] : memref<4xf32>)
// CHECK-NEXT: %[[UW:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: %[[INF:.*]] = memref.alloc() : memref<i1>
// CHECK-NEXT: memopt.kernel "memopt.unscale" ins(%[[S]], %[[DW]], %[[DV]] : {{.*}}) outs(%[[UW]], %[[DV]], %[[INF]] : {{.*}})
// CHECK: memopt.kernel "memopt.reduce_sum" ins(%[[DW]] : memref<4xf32>) outs(%[[LOSS]] : memref<f32>)
// CHECK: memopt.kernel "memopt.sub" ins(%[[W]], %[[UW]] : {{.*}}) outs(%[[W]] : memref<4xf32>)
// CHECK: memopt.kernel "memopt.sub" ins(%[[V]], %[[DV]] : {{.*}}) outs(%[[V]] : memref<4xf32>)

// PLAN-LABEL: func.func @still_live
// PLAN-SAME: memopt.arena_bytes = 1024 : i64

func.func @still_live(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"},
                      %w: tensor<4xf32> {memopt.role = "param", memopt.name = "w"},
                      %v: tensor<4xf32> {memopt.role = "param", memopt.name = "v"},
                      %s: tensor<f32> {memopt.role = "optim", memopt.name = "optimizer.loss_scale"})
    -> (tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) attributes {memopt.train_step} {
  %dw = memopt.mul %x, %w : tensor<4xf32>
  %dv = memopt.exp %x : tensor<4xf32>
  %u:2, %inf = memopt.unscale %s, %dw, %dv : tensor<4xf32>, tensor<4xf32>
  %l = memopt.reduce_sum %dw dims [0] : tensor<4xf32> to tensor<f32>
  %w2 = memopt.sub %w, %u#0 : tensor<4xf32>
  %v2 = memopt.sub %v, %u#1 : tensor<4xf32>
  return %l, %w2, %v2, %s : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// Which gradients are unscaled in place: a reshape view of a dying scratch
// buffer is (%dw into the view of %e's buffer); an argument never is (%x),
// nor a buffer that another operand of the unscale also reads: the same
// gradient twice (%dd), or a view of the scale's buffer (%ds), as the
// runtime goes through the tensors one after the other.

// CHECK-LABEL: func.func @shared
// CHECK-SAME: (%[[X:[^:]*]]: memref<4xf32>
// CHECK: %[[S:.*]] = memref.alloc() : memref<f32>
// CHECK: %[[DS:.*]] = memref.reinterpret_cast %[[S]]
// CHECK: %[[E:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[DW:.*]] = memref.reinterpret_cast %[[E]]
// CHECK: %[[DD:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.neg" ins(%[[X]] : memref<4xf32>) outs(%[[DD]] : memref<4xf32>)
// CHECK-NEXT: %[[U1:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: %[[U2:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: %[[U3:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: %[[U4:.*]] = memref.alloc() : memref<1xf32>
// CHECK-NEXT: %[[INF:.*]] = memref.alloc() : memref<i1>
// CHECK-NEXT: memopt.kernel "memopt.unscale" ins(%[[S]], %[[DW]], %[[X]], %[[DD]], %[[DD]], %[[DS]] : {{.*}}) outs(%[[DW]], %[[U1]], %[[U2]], %[[U3]], %[[U4]], %[[INF]] : {{.*}})

// PLAN-LABEL: func.func @shared
// PLAN: memopt.kernel "memopt.unscale"

func.func @shared(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"},
                  %w: tensor<2x2xf32> {memopt.role = "param", memopt.name = "w"},
                  %v: tensor<4xf32> {memopt.role = "param", memopt.name = "v"},
                  %p: tensor<4xf32> {memopt.role = "param", memopt.name = "p"},
                  %q: tensor<4xf32> {memopt.role = "param", memopt.name = "q"},
                  %r: tensor<1xf32> {memopt.role = "param", memopt.name = "r"})
    -> (tensor<f32>, tensor<2x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<1xf32>) attributes {memopt.train_step} {
  %l = memopt.reduce_sum %x dims [0] : tensor<4xf32> to tensor<f32>
  %s = memopt.constant dense<8.0> : tensor<f32>
  %ds = memopt.reshape %s : tensor<f32> to tensor<1xf32>
  %e = memopt.exp %x : tensor<4xf32>
  %dw = memopt.reshape %e : tensor<4xf32> to tensor<2x2xf32>
  %dd = memopt.neg %x : tensor<4xf32>
  %u:5, %inf = memopt.unscale %s, %dw, %x, %dd, %dd, %ds : tensor<2x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<1xf32>
  %w2 = memopt.sub %w, %u#0 : tensor<2x2xf32>
  %v2 = memopt.sub %v, %u#1 : tensor<4xf32>
  %p2 = memopt.sub %p, %u#2 : tensor<4xf32>
  %q2 = memopt.sub %q, %u#3 : tensor<4xf32>
  %r2 = memopt.sub %r, %u#4 : tensor<1xf32>
  return %l, %w2, %v2, %p2, %q2, %r2 : tensor<f32>, tensor<2x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<1xf32>
}
