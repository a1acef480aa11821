// RUN: memopt-opt %s --convert-memopt-to-emitc | memopt-translate --memopt-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -I%memopt_src_root/runtime/include %t.cpp

// Optimizer offload (docs/Offload.md): a buffer in host memory is addressed
// from the host arena, the fourth parameter; a kernel marked memopt.on_host
// calls the host entry; a transfer calls memopt_transfer with its bytes.

// CHECK: extern "C" void memopt_train_step(memopt_context* [[CTX:v[0-9]+]], void *const* {{v[0-9]+}}, uint8_t* {{v[0-9]+}}, uint8_t* [[HOST:v[0-9]+]]) {
// CHECK: float* [[G:v[0-9]+]] = (float*)
// CHECK: float* [[P:v[0-9]+]] = (float*)
// CHECK: uint16_t* [[C:v[0-9]+]] = (uint16_t*)
// CHECK: uint8_t* [[H8:v[0-9]+]] = [[HOST]] + {{v[0-9]+}};
// CHECK-NEXT: float* [[H:v[0-9]+]] = (float*) [[H8]];
// CHECK-NEXT: memopt_transfer([[CTX]], MEMOPT_TO_HOST, [[G]], [[H]], 32);
// CHECK-NEXT: memopt_host_sgd_update([[CTX]], MEMOPT_F32, [[P]], [[H]], [[P]], nullptr, [[P]], [[P]], 8,
// CHECK: uint8_t* [[L8:v[0-9]+]] = [[HOST]] + {{v[0-9]+}};
// CHECK-NEXT: uint16_t* [[L:v[0-9]+]] = (uint16_t*) [[L8]];
// CHECK-NEXT: memopt_host_cast([[CTX]], MEMOPT_F32, [[P]], MEMOPT_BF16, [[L]], 8);
// CHECK-NEXT: memopt_transfer([[CTX]], MEMOPT_TO_DEVICE, [[L]], [[C]], 16);

func.func @train_step(%g: memref<8xf32> {memopt.role = "input", memopt.name = "g"},
                      %p: memref<8xf32> {memopt.role = "param", memopt.name = "p", memopt.memory = "host"},
                      %c: memref<8xbf16> {memopt.role = "param_copy", memopt.name = "p"},
                      %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.arena_bytes = 0 : i64, memopt.host_arena_bytes = 512 : i64, memopt.train_step} {
  %h = memref.alloc() {memopt.memory = "host", memopt.offset = 0 : i64} : memref<8xf32>
  memopt.kernel "memopt.transfer" ins(%g : memref<8xf32>) outs(%h : memref<8xf32>) with {to = #memopt<memory host>}
  memopt.kernel "memopt.sgd_update" ins(%p, %h, %p : memref<8xf32>, memref<8xf32>, memref<8xf32>) outs(%p, %p : memref<8xf32>, memref<8xf32>) with {lr = 1.0e-01 : f64, momentum = 0.0 : f64, weight_decay = 0.0 : f64} {memopt.on_host}
  memref.dealloc %h : memref<8xf32>
  %l = memref.alloc() {memopt.memory = "host", memopt.offset = 256 : i64} : memref<8xbf16>
  memopt.kernel "memopt.cast" ins(%p : memref<8xf32>) outs(%l : memref<8xbf16>) with {} {memopt.on_host}
  memopt.kernel "memopt.transfer" ins(%l : memref<8xbf16>) outs(%c : memref<8xbf16>) with {to = #memopt<memory device>}
  memref.dealloc %l : memref<8xbf16>
  return
}
