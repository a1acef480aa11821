// RUN: memopt-opt %s -split-input-file -verify-diagnostics -memopt-plan-buffers
// RUN: not memopt-opt %s -split-input-file -memopt-plan-buffers=alignment=0 2>&1 | FileCheck %s --check-prefix=ALIGN
// RUN: not memopt-opt %s -split-input-file -memopt-plan-buffers=time-limit=-1 2>&1 | FileCheck %s --check-prefix=TIME

// ALIGN: error: --memopt-plan-buffers: alignment 0 is not in [1, 2^30]
// TIME: error: --memopt-plan-buffers: time-limit must be a non-negative number of seconds

// expected-error @below {{no function marked 'memopt.train_step' to plan (run --memopt-autodiff first)}}
module {
  func.func @f(%x: memref<8xf32>) {
    return
  }
}

// -----

func.func @train_step(%x: memref<8xf32>, %n: index) attributes {memopt.train_step} {
  // expected-error @below {{'memref.alloc' op has a dynamic shape ('memref<?xf32>'); --memopt-plan-buffers needs static shapes}}
  %a = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %a : memref<?xf32>
  return
}

// -----

func.func @train_step(%n: index) attributes {memopt.train_step} {
  // expected-error @below {{'memref.alloc' op has no known byte size ('memref<4x4xf32, strided<[?, 1]>>'); --memopt-plan-buffers needs a static layout and an integer, float, index, complex or vector element type}}
  %a = memref.alloc()[%n] : memref<4x4xf32, strided<[?, 1]>>
  memref.dealloc %a : memref<4x4xf32, strided<[?, 1]>>
  return
}
