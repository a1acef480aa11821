// RUN: memopt-opt %s --convert-memopt-to-emitc -split-input-file | FileCheck %s

// The entry point, argument pointers and arena addresses.

// CHECK: emitc.include <"cstddef">
// CHECK-NEXT: emitc.include <"cstdint">
// CHECK-NEXT: emitc.include "memopt/runtime.h"
// CHECK-LABEL: emitc.func @memopt_train_step
// CHECK-SAME: (%[[CTX:.*]]: !emitc.ptr<!emitc.opaque<"memopt_context">>, %[[ARGS:.*]]: !emitc.ptr<!emitc.opaque<"void *const">>, %[[SCRATCH:[^:]*]]: !emitc.ptr<ui8>, %[[HOST:.*]]: !emitc.ptr<ui8>) attributes {specifiers = ["extern \22C\22"]}
// CHECK-NEXT: %[[I0:.*]] = "emitc.constant"() <{value = 0 : index}> : () -> index
// CHECK-NEXT: %[[S0:.*]] = subscript %[[ARGS]][%[[I0]]]
// CHECK-NEXT: %[[L0:.*]] = load %[[S0]]
// CHECK-NEXT: %[[X:.*]] = cast %[[L0]] : !emitc.opaque<"void *const"> to !emitc.ptr<ui16>
// CHECK: %[[W:.*]] = cast %{{.*}} : !emitc.opaque<"void *const"> to !emitc.ptr<ui16>
// CHECK: %[[T:.*]] = cast %{{.*}} : !emitc.opaque<"void *const"> to !emitc.ptr<i64>
// CHECK: %[[LOSS:.*]] = cast %{{.*}} : !emitc.opaque<"void *const"> to !emitc.ptr<f32>
// CHECK-NEXT: %[[OFF:.*]] = "emitc.constant"() <{value = 256 : i64}> : () -> i64
// CHECK-NEXT: %[[ADDR:.*]] = add %[[SCRATCH]], %[[OFF]] : (!emitc.ptr<ui8>, i64) -> !emitc.ptr<ui8>
// CHECK-NEXT: %[[H:.*]] = cast %[[ADDR]] : !emitc.ptr<ui8> to !emitc.ptr<ui16>
// CHECK-NEXT: call_opaque "memopt_matmul"(%[[CTX]], %[[X]], %[[W]], %[[H]]) {args = [0 : index, #emitc.opaque<"MEMOPT_BF16">, 1 : index, 2 : index, 3 : index, 2, 1, 8, 3, 4, 0 : i32, 1 : i32, #emitc.opaque<"MEMOPT_BF16">]}
// CHECK-NOT: dealloc
// CHECK: call_opaque "memopt_increment"(%[[CTX]], %[[T]], %[[T]]) {args = [0 : index, 1 : index, #emitc.opaque<"nullptr">, 2 : index]}
// CHECK-NEXT: return
func.func @train_step(%x: memref<2x8x4xbf16> {memopt.role = "input", memopt.name = "x"},
                      %w: memref<3x4xbf16> {memopt.role = "param", memopt.name = "w"},
                      %t: memref<i64> {memopt.role = "optim", memopt.name = "optimizer.step"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 512 : i64, memopt.train_step} {
  %h = memref.alloc() {memopt.offset = 256 : i64} : memref<2x8x3xbf16>
  memopt.kernel "memopt.matmul" ins(%x, %w : memref<2x8x4xbf16>, memref<3x4xbf16>) outs(%h : memref<2x8x3xbf16>) with {transpose_rhs}
  memref.dealloc %h : memref<2x8x3xbf16>
  memopt.kernel "memopt.increment" ins(%t : memref<i64>) outs(%t : memref<i64>) with {}
  return
}

// -----

// One call per kernel, with the dtype, the collapsed extents and the
// attributes as constants.

// CHECK-LABEL: emitc.func @memopt_train_step
// CHECK-SAME: (%[[CTX:[^:]*]]:
// CHECK: %[[X:.*]] = cast %{{.*}} to !emitc.ptr<f32>
// CHECK: %[[LABELS:.*]] = cast %{{.*}} to !emitc.ptr<i64>
// CHECK: %[[G:.*]] = cast %{{.*}} to !emitc.ptr<f32>
// CHECK: %[[B:.*]] = cast %{{.*}} to !emitc.ptr<f32>
// CHECK: %[[LOSS:.*]] = cast %{{.*}} to !emitc.ptr<f32>
// CHECK: %[[A:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_binary"(%[[CTX]], %[[X]], %[[X]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_BINARY_MUL">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 3 : index, 64]}
// CHECK-NEXT: call_opaque "memopt_unary"(%[[CTX]], %[[A]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_UNARY_GELU_TANH">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 64]}
// CHECK-NEXT: call_opaque "memopt_scalar"(%[[CTX]], %[[A]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_SCALAR_MUL">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 5.000000e-01, 2 : index, 64]}
// CHECK-NEXT: call_opaque "memopt_softmax"(%[[CTX]], %[[X]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 2, 4, 8]}
// CHECK: %[[M:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK: %[[R:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_layer_norm"(%[[CTX]], %[[X]], %[[G]], %[[B]], %[[A]], %[[M]], %[[R]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, #emitc.opaque<"MEMOPT_F32">, 2 : index, 3 : index, 4 : index, 5 : index, 6 : index, 8, 8, 1.000000e-05]}
// CHECK: %[[RED:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_reduce"(%[[CTX]], %[[X]], %[[RED]]) {args = [0 : index, #emitc.opaque<"MEMOPT_REDUCE_MEAN">, #emitc.opaque<"MEMOPT_F32">, 1 : index, #emitc.opaque<"MEMOPT_F32">, 2 : index, 2, 4, 8]}
// CHECK-NEXT: call_opaque "memopt_cross_entropy"(%[[CTX]], %[[A]], %[[LABELS]], %[[LOSS]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, #emitc.opaque<"MEMOPT_I64">, 2 : index, 3 : index, 8, 8, -1, #emitc.opaque<"MEMOPT_REDUCTION_SUM">, 0.000000e+00]}
// CHECK-NEXT: call_opaque "memopt_cross_entropy_grad"(%[[CTX]], %[[A]], %[[LABELS]], %[[LOSS]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, #emitc.opaque<"MEMOPT_I64">, 2 : index, 3 : index, 4 : index, 8, 8, -100, #emitc.opaque<"MEMOPT_REDUCTION_MEAN">, 1.000000e-01]}
// CHECK-NEXT: call_opaque "memopt_copy"(%[[CTX]], %[[A]], %[[X]]) {args = [0 : index, 1 : index, 2 : index, 256]}
// CHECK-NEXT: return
func.func @train_step(%x: memref<2x4x8xf32> {memopt.role = "input", memopt.name = "x"},
                      %labels: memref<8xi64> {memopt.role = "label", memopt.name = "labels"},
                      %g: memref<8xf32> {memopt.role = "param", memopt.name = "ln.weight"},
                      %b: memref<8xf32> {memopt.role = "param", memopt.name = "ln.bias"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 512 : i64, memopt.train_step} {
  %a = memref.alloc() {memopt.offset = 0 : i64} : memref<2x4x8xf32>
  memopt.kernel "memopt.mul" ins(%x, %x : memref<2x4x8xf32>, memref<2x4x8xf32>) outs(%a : memref<2x4x8xf32>) with {}
  memopt.kernel "memopt.gelu" ins(%a : memref<2x4x8xf32>) outs(%a : memref<2x4x8xf32>) with {approximate = #memopt.approximate<tanh>}
  memopt.kernel "memopt.mul_scalar" ins(%a : memref<2x4x8xf32>) outs(%a : memref<2x4x8xf32>) with {value = 5.0e-01 : f64}
  memopt.kernel "memopt.softmax" ins(%x : memref<2x4x8xf32>) outs(%a : memref<2x4x8xf32>) with {dim = 1 : i64}
  %m = memref.alloc() {memopt.offset = 256 : i64} : memref<2x4xf32>
  %r = memref.alloc() {memopt.offset = 288 : i64} : memref<2x4xf32>
  memopt.kernel "memopt.layer_norm" ins(%x, %g, %b : memref<2x4x8xf32>, memref<8xf32>, memref<8xf32>) outs(%a, %m, %r : memref<2x4x8xf32>, memref<2x4xf32>, memref<2x4xf32>) with {epsilon = 1.0e-05 : f64}
  %red = memref.alloc() {memopt.offset = 320 : i64} : memref<2x8xf32>
  memopt.kernel "memopt.reduce_mean" ins(%x : memref<2x4x8xf32>) outs(%red : memref<2x8xf32>) with {dims = array<i64: 1>}
  memopt.kernel "memopt.cross_entropy" ins(%a, %labels : memref<2x4x8xf32>, memref<8xi64>) outs(%loss : memref<f32>) with {ignore_index = -1 : i64, reduction = #memopt.reduction<sum>}
  memopt.kernel "memopt.cross_entropy_grad" ins(%a, %labels, %loss : memref<2x4x8xf32>, memref<8xi64>, memref<f32>) outs(%a : memref<2x4x8xf32>) with {label_smoothing = 1.000000e-01 : f64}
  memopt.kernel "memopt.reshape" ins(%x : memref<2x4x8xf32>) outs(%a : memref<2x4x8xf32>) with {}
  return
}

// -----

// Embeddings: only the gradient takes padding_idx, -1 when there is none.

// CHECK-LABEL: emitc.func @memopt_train_step
// CHECK-SAME: (%[[CTX:[^:]*]]:
// CHECK: %[[W:.*]] = cast %{{.*}} to !emitc.ptr<f32>
// CHECK: %[[IDS:.*]] = cast %{{.*}} to !emitc.ptr<i32>
// CHECK: %[[E:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_embedding"(%[[CTX]], %[[W]], %[[IDS]], %[[E]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, #emitc.opaque<"MEMOPT_I32">, 2 : index, 3 : index, 6, 5, 4]}
// CHECK: %[[D:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_embedding_grad"(%[[CTX]], %[[E]], %[[IDS]], %[[D]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, #emitc.opaque<"MEMOPT_I32">, 2 : index, 3 : index, 6, 5, 4, 3]}
// CHECK-NEXT: call_opaque "memopt_embedding_grad"(%[[CTX]], %[[E]], %[[IDS]], %[[D]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, #emitc.opaque<"MEMOPT_I32">, 2 : index, 3 : index, 6, 5, 4, -1]}
// CHECK-NEXT: return
func.func @train_step(%w: memref<5x4xf32> {memopt.role = "param", memopt.name = "w"},
                      %ids: memref<2x3xi32> {memopt.role = "input", memopt.name = "ids"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  %e = memref.alloc() {memopt.offset = 0 : i64} : memref<2x3x4xf32>
  memopt.kernel "memopt.embedding" ins(%w, %ids : memref<5x4xf32>, memref<2x3xi32>) outs(%e : memref<2x3x4xf32>) with {padding_idx = 3 : i64}
  %d = memref.alloc() {memopt.offset = 128 : i64} : memref<5x4xf32>
  memopt.kernel "memopt.embedding_grad" ins(%e, %ids : memref<2x3x4xf32>, memref<2x3xi32>) outs(%d : memref<5x4xf32>) with {padding_idx = 3 : i64}
  memopt.kernel "memopt.embedding_grad" ins(%e, %ids : memref<2x3x4xf32>, memref<2x3xi32>) outs(%d : memref<5x4xf32>) with {}
  return
}

// -----

// Constants: splats are filled, other data is copied from a static array.
// Shape arrays are static globals shared by the calls that need them.

// CHECK: emitc.global static const @memopt_const_0 : !emitc.array<4xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK-NEXT: emitc.global static const @memopt_const_1 : !emitc.array<4xui8> = dense<[1, 0, 0, 1]>
// CHECK-NEXT: emitc.global static const @memopt_i64_2 : !emitc.array<1xi64> = dense<4>
// CHECK-NEXT: emitc.global static const @memopt_i64_3 : !emitc.array<1xi64> = dense<1>
// CHECK-NEXT: emitc.global static const @memopt_i64_4 : !emitc.array<2xi64> = dense<[3, 4]>
// CHECK-LABEL: emitc.func @memopt_train_step
// CHECK-SAME: (%[[CTX:[^:]*]]:
// CHECK: %[[P:.*]] = cast %{{.*}} to !emitc.ptr<f32>
// CHECK: %[[T:.*]] = cast %{{.*}} to !emitc.ptr<i64>
// CHECK: %[[C:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_fill"(%[[CTX]], %[[C]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, 4, -1.000000e+09]}
// CHECK-NEXT: call_opaque "memopt_copy_from_host"(%[[CTX]], %[[C]]) {args = [0 : index, 1 : index, #emitc.opaque<"memopt_const_0">, 16]}
// CHECK: %[[MASK:.*]] = add %{{.*}}, %{{.*}} : (!emitc.ptr<ui8>, i64) -> !emitc.ptr<ui8>
// CHECK-NEXT: call_opaque "memopt_copy_from_host"(%[[CTX]], %[[MASK]]) {args = [0 : index, 1 : index, #emitc.opaque<"memopt_const_1">, 4]}
// CHECK: %[[BC:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_broadcast"(%[[CTX]], %[[C]], %[[BC]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, 1, #emitc.opaque<"memopt_i64_2">, #emitc.opaque<"memopt_i64_3">, 2 : index, 2, #emitc.opaque<"memopt_i64_4">]}
// CHECK: %[[SKIP:.*]] = add %{{.*}}, %{{.*}} : (!emitc.ptr<ui8>, i64) -> !emitc.ptr<ui8>
// CHECK-NEXT: call_opaque "memopt_adamw_update"(%[[CTX]], %[[P]], %[[C]], %[[P]], %[[P]], %[[T]], %[[SKIP]], %[[P]], %[[P]], %[[P]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 3 : index, 4 : index, 5 : index, 6 : index, 7 : index, 8 : index, 9 : index, 4, 1.000000e-03, 9.000000e-01, 0.99899999999999999, 1.000000e-08, 0.000000e+00]}
func.func @train_step(%p: memref<4xf32> {memopt.role = "param", memopt.name = "p"},
                      %t: memref<i64> {memopt.role = "optim", memopt.name = "optimizer.step"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 1024 : i64, memopt.train_step} {
  %c = memref.alloc() {memopt.offset = 0 : i64} : memref<4xf32>
  memopt.kernel "memopt.constant" outs(%c : memref<4xf32>) with {value = dense<-1.0e+09> : tensor<4xf32>}
  memopt.kernel "memopt.constant" outs(%c : memref<4xf32>) with {value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}
  %mask = memref.alloc() {memopt.offset = 256 : i64} : memref<4xi1>
  memopt.kernel "memopt.constant" outs(%mask : memref<4xi1>) with {value = dense<[true, false, false, true]> : tensor<4xi1>}
  %bc = memref.alloc() {memopt.offset = 512 : i64} : memref<3x4xf32>
  memopt.kernel "memopt.broadcast" ins(%c : memref<4xf32>) outs(%bc : memref<3x4xf32>) with {dims = array<i64: 1>}
  %skip = memref.alloc() {memopt.offset = 768 : i64} : memref<i1>
  memopt.kernel "memopt.adamw_update" ins(%p, %c, %p, %p, %t, %skip : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<i64>, memref<i1>) outs(%p, %p, %p : memref<4xf32>, memref<4xf32>, memref<4xf32>) with {beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-08 : f64, lr = 1.0e-03 : f64, weight_decay = 0.0 : f64}
  return
}

// -----

// A reshape view (--memopt-bufferize with reuse) is its source's pointer, for
// an allocation and for an argument alike: no call, no copy.

// CHECK-LABEL: emitc.func @memopt_train_step
// CHECK-SAME: (%[[CTX:[^:]*]]:
// CHECK: %[[X:.*]] = cast %{{.*}} : !emitc.opaque<"void *const"> to !emitc.ptr<f32>
// CHECK: %[[LOSS:.*]] = cast %{{.*}} : !emitc.opaque<"void *const"> to !emitc.ptr<f32>
// CHECK: %[[A:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_unary"(%[[CTX]], %[[X]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_UNARY_EXP">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 6]}
// CHECK-NEXT: call_opaque "memopt_unary"(%[[CTX]], %[[A]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_UNARY_RELU">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 6]}
// CHECK-NEXT: call_opaque "memopt_reduce"(%[[CTX]], %[[A]], %[[LOSS]]) {args = [0 : index, #emitc.opaque<"MEMOPT_REDUCE_SUM">, #emitc.opaque<"MEMOPT_F32">, 1 : index, #emitc.opaque<"MEMOPT_F32">, 2 : index, 1, 6, 1]}
// CHECK-NEXT: return
func.func @train_step(%x: memref<2x3xf32> {memopt.role = "input", memopt.name = "x"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  %xv = memref.reinterpret_cast %x to offset: [0], sizes: [6], strides: [1] : memref<2x3xf32> to memref<6xf32>
  %a = memref.alloc() {memopt.offset = 0 : i64} : memref<6xf32>
  memopt.kernel "memopt.exp" ins(%xv : memref<6xf32>) outs(%a : memref<6xf32>) with {}
  %av = memref.reinterpret_cast %a to offset: [0], sizes: [3, 2], strides: [2, 1] : memref<6xf32> to memref<3x2xf32>
  memopt.kernel "memopt.relu" ins(%av : memref<3x2xf32>) outs(%av : memref<3x2xf32>) with {}
  memopt.kernel "memopt.reduce_sum" ins(%av : memref<3x2xf32>) outs(%loss : memref<f32>) with {dims = array<i64: 0, 1>}
  memref.dealloc %a : memref<6xf32>
  return
}

// -----

// hardswish, hardsigmoid and mish are kinds of memopt_unary and
// memopt_activation_grad. A clamp passes its bounds as doubles, a missing one
// infinite (INFINITY in C++), and its gradient `inclusive` as an int, 1 when
// the attribute is absent.

// CHECK-LABEL: emitc.func @memopt_train_step
// CHECK-SAME: (%[[CTX:[^:]*]]:
// CHECK: %[[X:.*]] = cast %{{.*}} : !emitc.opaque<"void *const"> to !emitc.ptr<f32>
// CHECK: %[[A:.*]] = cast %{{.*}} : !emitc.ptr<ui8> to !emitc.ptr<f32>
// CHECK-NEXT: call_opaque "memopt_unary"(%[[CTX]], %[[X]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_UNARY_HARDSWISH">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_unary"(%[[CTX]], %[[X]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_UNARY_HARDSIGMOID">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_unary"(%[[CTX]], %[[X]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_UNARY_MISH">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_activation_grad"(%[[CTX]], %[[X]], %[[A]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_GRAD_HARDSWISH">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 3 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_activation_grad"(%[[CTX]], %[[X]], %[[A]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_GRAD_HARDSIGMOID">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 3 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_activation_grad"(%[[CTX]], %[[X]], %[[A]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_GRAD_MISH">, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 3 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_clamp"(%[[CTX]], %[[X]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, 0.000000e+00, 6.000000e+00, 2 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_clamp"(%[[CTX]], %[[X]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, -1.000000e+00, 0x7FF0000000000000 : f64, 2 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_clamp_grad"(%[[CTX]], %[[X]], %[[A]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 0xFFF0000000000000 : f64, 2.500000e+00, 1 : i32, 3 : index, 8]}
// CHECK-NEXT: call_opaque "memopt_clamp_grad"(%[[CTX]], %[[X]], %[[A]], %[[A]]) {args = [0 : index, #emitc.opaque<"MEMOPT_F32">, 1 : index, 2 : index, 0.000000e+00, 6.000000e+00, 0 : i32, 3 : index, 8]}
// CHECK-NEXT: return
func.func @train_step(%x: memref<2x4xf32> {memopt.role = "param", memopt.name = "x"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 256 : i64, memopt.train_step} {
  %a = memref.alloc() {memopt.offset = 0 : i64} : memref<2x4xf32>
  memopt.kernel "memopt.hardswish" ins(%x : memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {}
  memopt.kernel "memopt.hardsigmoid" ins(%x : memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {}
  memopt.kernel "memopt.mish" ins(%x : memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {}
  memopt.kernel "memopt.hardswish_grad" ins(%x, %a : memref<2x4xf32>, memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {}
  memopt.kernel "memopt.hardsigmoid_grad" ins(%x, %a : memref<2x4xf32>, memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {}
  memopt.kernel "memopt.mish_grad" ins(%x, %a : memref<2x4xf32>, memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {}
  memopt.kernel "memopt.clamp" ins(%x : memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {inclusive = false, max = 6.0 : f64, min = 0.0 : f64}
  memopt.kernel "memopt.clamp" ins(%x : memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {min = -1.0 : f64}
  memopt.kernel "memopt.clamp_grad" ins(%x, %a : memref<2x4xf32>, memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {max = 2.5 : f64}
  memopt.kernel "memopt.clamp_grad" ins(%x, %a : memref<2x4xf32>, memref<2x4xf32>) outs(%a : memref<2x4xf32>) with {inclusive = false, max = 6.0 : f64, min = 0.0 : f64}
  return
}
