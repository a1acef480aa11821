// RUN: memopt-opt %s --convert-memopt-to-emitc | memopt-translate --memopt-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -I%memopt_src_root/runtime/include %t.cpp

// A kernel of every kind the runtime has an entry for, printed as C++ that
// compiles against runtime.h.

// CHECK: #include <cstddef>
// CHECK-NEXT: #include <cstdint>
// CHECK-NEXT: #include "memopt/runtime.h"
// CHECK: static const int64_t [[SHAPE:memopt_i64_[0-9]+]][4] = {2, 3, 4, 4};
// CHECK: extern "C" void memopt_train_step(memopt_context* [[CTX:v[0-9]+]], void *const* [[ARGS:v[0-9]+]], uint8_t* [[SCRATCH:v[0-9]+]], uint8_t* [[HOST:v[0-9]+]]) {
// CHECK-NEXT: size_t [[I0:v[0-9]+]] = 0;
// CHECK-NEXT: void *const [[A0:v[0-9]+]] = [[ARGS]][[[I0]]];
// CHECK-NEXT: float* [[X:v[0-9]+]] = (float*) [[A0]];
// CHECK: int64_t [[OFF:v[0-9]+]] = 0;
// CHECK-NEXT: uint8_t* [[P:v[0-9]+]] = [[SCRATCH]] + [[OFF]];
// CHECK-NEXT: float* [[T:v[0-9]+]] = (float*) [[P]];
// CHECK-NEXT: memopt_transpose([[CTX]], MEMOPT_F32, [[X]], 4, [[SHAPE]], memopt_i64_{{[0-9]+}}, [[T]]);
// CHECK: memopt_conv2d([[CTX]], MEMOPT_F32, {{.*}}, 2, 3, 4, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1);
// CHECK: memopt_max_pool2d([[CTX]], MEMOPT_F32, {{.*}}, 2, 5, 4, 4, 2, 2, 2, 2, 0, 0);
// CHECK: const void *[[INPUTS:memopt_inputs_[0-9]+]][] = {[[X]], [[X]]};
// CHECK-NEXT: memopt_concat([[CTX]], MEMOPT_F32, 2, [[INPUTS]], memopt_i64_{{[0-9]+}}, {{v[0-9]+}}, 2, 16);
// CHECK: memopt_dropout([[CTX]], MEMOPT_F32, [[X]], {{v[0-9]+}}, 96, 1, 1.00000000000000010e-01, 7, 3, 0);
// CHECK: memopt_rms_norm([[CTX]], MEMOPT_F32, [[X]], MEMOPT_F32, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 24, 4, 9.99999999999999950e-07);
// CHECK: memopt_broadcast([[CTX]], MEMOPT_F32, {{v[0-9]+}}, 0, nullptr, nullptr, {{v[0-9]+}}, 4, [[SHAPE]]);
// CHECK: const memopt_dtype [[DTYPES:memopt_dtypes_[0-9]+]][] = {MEMOPT_F32};
// CHECK-NEXT: const void *[[GRADS:memopt_grads_[0-9]+]][] = {[[X]]};
// CHECK-NEXT: void *[[RESULTS:memopt_results_[0-9]+]][] = {{{v[0-9]+}}};
// CHECK-NEXT: memopt_unscale([[CTX]], {{v[0-9]+}}, 1, [[DTYPES]], [[GRADS]], [[RESULTS]], memopt_i64_{{[0-9]+}}, {{v[0-9]+}});
// CHECK: return;
// CHECK-NEXT: }
func.func @train_step(%x: memref<2x3x4x4xf32> {memopt.role = "input", memopt.name = "x"},
                      %ids: memref<2x3xi32> {memopt.role = "input", memopt.name = "ids"},
                      %table: memref<10x4xf32> {memopt.role = "param", memopt.name = "wte"},
                      %filter: memref<5x3x3x3xf32> {memopt.role = "param", memopt.name = "conv.weight"},
                      %bn: memref<3xf32> {memopt.role = "param", memopt.name = "bn.weight"},
                      %norm: memref<4xf32> {memopt.role = "param", memopt.name = "norm.weight"},
                      %scale: memref<f32> {memopt.role = "state", memopt.name = "scale"},
                      %tracker: memref<i64> {memopt.role = "state", memopt.name = "tracker"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 65536 : i64, memopt.train_step} {
  %t = memref.alloc() {memopt.offset = 0 : i64} : memref<2x3x4x4xf32>
  memopt.kernel "memopt.transpose" ins(%x : memref<2x3x4x4xf32>) outs(%t : memref<2x3x4x4xf32>) with {permutation = array<i64: 0, 1, 3, 2>}
  %c = memref.alloc() {memopt.offset = 1024 : i64} : memref<2x5x4x4xf32>
  memopt.kernel "memopt.conv2d" ins(%x, %filter : memref<2x3x4x4xf32>, memref<5x3x3x3xf32>) outs(%c : memref<2x5x4x4xf32>) with {padding = array<i64: 1, 1>}
  memopt.kernel "memopt.conv2d_grad_input" ins(%c, %filter : memref<2x5x4x4xf32>, memref<5x3x3x3xf32>) outs(%t : memref<2x3x4x4xf32>) with {padding = array<i64: 1, 1>}
  %gf = memref.alloc() {memopt.offset = 2048 : i64} : memref<5x3x3x3xf32>
  memopt.kernel "memopt.conv2d_grad_filter" ins(%c, %x : memref<2x5x4x4xf32>, memref<2x3x4x4xf32>) outs(%gf : memref<5x3x3x3xf32>) with {padding = array<i64: 1, 1>}
  %p = memref.alloc() {memopt.offset = 3072 : i64} : memref<2x5x2x2xf32>
  memopt.kernel "memopt.max_pool2d" ins(%c : memref<2x5x4x4xf32>) outs(%p : memref<2x5x2x2xf32>) with {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
  memopt.kernel "memopt.max_pool2d_grad" ins(%p, %c : memref<2x5x2x2xf32>, memref<2x5x4x4xf32>) outs(%c : memref<2x5x4x4xf32>) with {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
  memopt.kernel "memopt.avg_pool2d" ins(%c : memref<2x5x4x4xf32>) outs(%p : memref<2x5x2x2xf32>) with {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
  memopt.kernel "memopt.avg_pool2d_grad" ins(%p : memref<2x5x2x2xf32>) outs(%c : memref<2x5x4x4xf32>) with {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>}
  %cat = memref.alloc() {memopt.offset = 4096 : i64} : memref<2x6x4x4xf32>
  memopt.kernel "memopt.concat" ins(%x, %x : memref<2x3x4x4xf32>, memref<2x3x4x4xf32>) outs(%cat : memref<2x6x4x4xf32>) with {dim = 1 : i64}
  memopt.kernel "memopt.dropout" ins(%x : memref<2x3x4x4xf32>) outs(%t : memref<2x3x4x4xf32>) with {p = 1.0e-01 : f64, seed = 7 : i64, stream = 3 : i64}
  %s = memref.alloc() {memopt.offset = 8192 : i64} : memref<2x3x2x4xf32>
  memopt.kernel "memopt.slice" ins(%x : memref<2x3x4x4xf32>) outs(%s : memref<2x3x2x4xf32>) with {starts = array<i64: 0, 0, 0, 0>, limits = array<i64: 2, 3, 4, 4>, strides = array<i64: 1, 1, 2, 1>}
  memopt.kernel "memopt.slice_grad" ins(%s : memref<2x3x2x4xf32>) outs(%t : memref<2x3x4x4xf32>) with {starts = array<i64: 0, 0, 0, 0>, limits = array<i64: 2, 3, 4, 4>, strides = array<i64: 1, 1, 2, 1>}
  %e = memref.alloc() {memopt.offset = 9216 : i64} : memref<2x3x4xf32>
  memopt.kernel "memopt.embedding" ins(%table, %ids : memref<10x4xf32>, memref<2x3xi32>) outs(%e : memref<2x3x4xf32>) with {}
  %ge = memref.alloc() {memopt.offset = 10240 : i64} : memref<10x4xf32>
  memopt.kernel "memopt.embedding_grad" ins(%e, %ids : memref<2x3x4xf32>, memref<2x3xi32>) outs(%ge : memref<10x4xf32>) with {}
  %st = memref.alloc() {memopt.offset = 11264 : i64} : memref<3xf32>
  %st2 = memref.alloc() {memopt.offset = 11520 : i64} : memref<3xf32>
  memopt.kernel "memopt.batch_norm" ins(%x, %bn, %bn, %st, %st2 : memref<2x3x4x4xf32>, memref<3xf32>, memref<3xf32>, memref<3xf32>, memref<3xf32>) outs(%t, %st, %st2, %st, %st2 : memref<2x3x4x4xf32>, memref<3xf32>, memref<3xf32>, memref<3xf32>, memref<3xf32>) with {epsilon = 1.0e-05 : f64, momentum = 1.0e-01 : f64}
  memopt.kernel "memopt.batch_norm_grad" ins(%t, %x, %bn, %st, %st2 : memref<2x3x4x4xf32>, memref<2x3x4x4xf32>, memref<3xf32>, memref<3xf32>, memref<3xf32>) outs(%t, %st, %st2 : memref<2x3x4x4xf32>, memref<3xf32>, memref<3xf32>) with {}
  %b16 = memref.alloc() {memopt.offset = 12288 : i64} : memref<2x3x4x4xbf16>
  memopt.kernel "memopt.cast" ins(%x : memref<2x3x4x4xf32>) outs(%b16 : memref<2x3x4x4xbf16>) with {}
  %mask = memref.alloc() {memopt.offset = 13312 : i64} : memref<2x3x4x4xi1>
  memopt.kernel "memopt.constant" outs(%mask : memref<2x3x4x4xi1>) with {value = dense<true> : tensor<2x3x4x4xi1>}
  memopt.kernel "memopt.where" ins(%mask, %x, %t : memref<2x3x4x4xi1>, memref<2x3x4x4xf32>, memref<2x3x4x4xf32>) outs(%t : memref<2x3x4x4xf32>) with {}
  memopt.kernel "memopt.masked_fill" ins(%x, %mask : memref<2x3x4x4xf32>, memref<2x3x4x4xi1>) outs(%t : memref<2x3x4x4xf32>) with {value = 0xFFF0000000000000 : f64}
  memopt.kernel "memopt.relu_grad" ins(%x, %t : memref<2x3x4x4xf32>, memref<2x3x4x4xf32>) outs(%t : memref<2x3x4x4xf32>) with {}
  memopt.kernel "memopt.log_softmax_grad" ins(%x, %t : memref<2x3x4x4xf32>, memref<2x3x4x4xf32>) outs(%t : memref<2x3x4x4xf32>) with {dim = 3 : i64}
  %r = memref.alloc() {memopt.offset = 14336 : i64} : memref<2x3x4xf32>
  memopt.kernel "memopt.rms_norm" ins(%x, %norm : memref<2x3x4x4xf32>, memref<4xf32>) outs(%t, %r : memref<2x3x4x4xf32>, memref<2x3x4xf32>) with {epsilon = 1.0e-06 : f64}
  %bx = memref.alloc() {memopt.offset = 15360 : i64} : memref<2x3x4x4xf32>
  memopt.kernel "memopt.broadcast" ins(%scale : memref<f32>) outs(%bx : memref<2x3x4x4xf32>) with {dims = array<i64>}
  %found = memref.alloc() {memopt.offset = 16384 : i64} : memref<i1>
  memopt.kernel "memopt.unscale" ins(%scale, %x : memref<f32>, memref<2x3x4x4xf32>) outs(%t, %found : memref<2x3x4x4xf32>, memref<i1>) with {}
  memopt.kernel "memopt.update_scale" ins(%scale, %tracker, %found : memref<f32>, memref<i64>, memref<i1>) outs(%scale, %tracker : memref<f32>, memref<i64>) with {backoff_factor = 5.0e-01 : f64, growth_factor = 2.0 : f64, growth_interval = 2000 : i64}
  memopt.kernel "memopt.scale_loss" ins(%loss, %scale : memref<f32>, memref<f32>) outs(%loss : memref<f32>) with {}
  return
}
