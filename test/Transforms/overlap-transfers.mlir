// RUN: memopt-opt %S/offload-activations.mlir --memopt-autodiff --memopt-offload-activations --memopt-bufferize --memopt-overlap-transfers --memopt-plan-buffers --memopt-verify-plan | FileCheck %s
// RUN: memopt-opt %S/offload-activations.mlir --memopt-autodiff --memopt-offload-optimizer --memopt-offload-activations --memopt-bufferize --memopt-overlap-transfers --memopt-plan-buffers --memopt-verify-plan | FileCheck %s --check-prefix=HOST
// RUN: memopt-opt %s -split-input-file --memopt-test-print-cost | FileCheck %s --check-prefix=SYNC
// RUN: memopt-opt %s -split-input-file --memopt-overlap-transfers --memopt-test-print-cost | FileCheck %s --check-prefix=OVERLAP
// RUN: memopt-opt %s -split-input-file --memopt-overlap-transfers | FileCheck %s --check-prefix=MOVED
// RUN: not memopt-opt %s -split-input-file --memopt-overlap-transfers=device=tpu 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: memopt-opt %S/overlap-transfers-invalid.mlir -split-input-file --memopt-verify-plan -verify-diagnostics

// Activation offload on the two-layer MLP: each copy to the host starts
// after its value's last forward reader and is waited for once the next
// op has run (or before the next copy starts); each copy back starts one
// stage before its reader, right after the previous copy's wait. One copy
// is in flight at a time, so every copy takes slot 0.
// CHECK: memopt.kernel "memopt.gelu"
// CHECK: memopt.kernel "memopt.transfer" ins(%[[H1:.*]] : memref<8x16xf32>) outs(%[[H1H:.*]] : memref<8x16xf32>) with {slot = 0 : i64, to = #memopt<memory host>}
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: memopt.kernel "memopt.matmul"
// CHECK-NEXT: memopt.transfer_wait %[[H1]], %[[H1H]] slot 0 : memref<8x16xf32>, memref<8x16xf32>
// CHECK-NEXT: memref.dealloc %[[H1]]
// The copies back: the second starts before the reader of the first.
// CHECK: memopt.kernel "memopt.cross_entropy_grad"
// CHECK: memopt.kernel "memopt.transfer" ins(%{{.*}}) outs(%[[A:.*]] : memref<8x16xf32>) with {slot = 0 : i64, to = #memopt<memory device>}
// CHECK-NEXT: memopt.kernel "memopt.matmul"
// CHECK-NEXT: memopt.transfer_wait %{{.*}}, %[[A]] slot 0
// CHECK: memopt.kernel "memopt.transfer" ins(%[[H1H]] : memref<8x16xf32>) outs(%[[H1D:.*]] : memref<8x16xf32>) with {slot = 0 : i64, to = #memopt<memory device>}
// CHECK-NEXT: memopt.kernel "memopt.matmul" ins({{.*}}, %[[A]] :
// CHECK-NOT: memopt.kernel
// CHECK: memopt.transfer_wait %[[H1H]], %[[H1D]] slot 0
// CHECK: memopt.kernel "memopt.gelu_grad" ins(%[[H1D]],

// When kernels run on the host (the optimizer's update), the host waits too.
// HOST: memopt.transfer_wait {{.*}} slot 0 host
// HOST-NOT: memopt.transfer_wait {{.*}} slot {{[0-9]+}} :
// HOST: return

// A 4 MiB copy to the device (4194304 B / 64e9 B/s + 10 us = 75.536 us on
// H100's PCIe 5.0) with a 1024^3 matmul between its start and its reader
// (49.407 us): issued where it is, the step waits for the whole copy;
// overlapped, for 75.536 - 49.407 = 26.129 us of it.
// SYNC:    transfer_bytes=4194304 transfer_seconds=7.5536e-05 exposed_seconds=7.5536e-05
// OVERLAP: op 1 memopt.kernel memopt.matmul {{.*}} seconds=4.9407e-05
// OVERLAP: transfer_bytes=4194304 transfer_seconds=7.5536e-05 exposed_seconds=2.6129e-05
// MOVED:      memopt.kernel "memopt.transfer" {{.*}} with {slot = 0 : i64, to = #memopt<memory device>}
// MOVED-NEXT: memref.alloc
// MOVED-NEXT: memopt.kernel "memopt.matmul"
// MOVED-NEXT: memopt.transfer_wait %arg1, %{{.*}} slot 0 :
// MOVED-NEXT: memopt.kernel "memopt.add"
// DEVICE: error: --memopt-overlap-transfers: unknown device 'tpu'
func.func @train_step(%a: memref<1024x1024xf32>, %h: memref<1024x1024xf32> {memopt.memory = "host"}, %loss: memref<f32>) attributes {memopt.train_step} {
  %d = memref.alloc() : memref<1024x1024xf32>
  memopt.kernel "memopt.transfer" ins(%h : memref<1024x1024xf32>) outs(%d : memref<1024x1024xf32>) with {to = #memopt<memory device>}
  %b = memref.alloc() : memref<1024x1024xf32>
  memopt.kernel "memopt.matmul" ins(%a, %a : memref<1024x1024xf32>, memref<1024x1024xf32>) outs(%b : memref<1024x1024xf32>) with {}
  memopt.kernel "memopt.add" ins(%d, %b : memref<1024x1024xf32>, memref<1024x1024xf32>) outs(%b : memref<1024x1024xf32>) with {}
  memref.dealloc %d : memref<1024x1024xf32>
  memref.dealloc %b : memref<1024x1024xf32>
  return
}

// -----

// Two copies to the host of 1 MiB each, the second's source computed after
// the first starts: the first's wait passes the matmul that reads its
// source (a read races with no copy) and stops at the second's start (one
// copy in flight), so the second reuses slot 0; with nothing after it, the
// second is waited for right away.
// MOVED:      func.func @train_step(%arg0: memref<512x512xf32>
// MOVED:      memopt.kernel "memopt.transfer" ins(%arg0 : {{.*}} with {slot = 0 : i64, to = #memopt<memory host>}
// MOVED-NEXT: memref.alloc
// MOVED-NEXT: memopt.kernel "memopt.matmul"
// MOVED-NEXT: memopt.transfer_wait %arg0, %{{.*}} slot 0 :
// MOVED-NEXT: memref.alloc
// MOVED-NEXT: memopt.kernel "memopt.transfer" ins(%{{.*}} : {{.*}} with {slot = 0 : i64, to = #memopt<memory host>}
// MOVED-NEXT: memopt.transfer_wait {{.*}} slot 0 :
// MOVED-NEXT: return
func.func @train_step(%a: memref<512x512xf32>, %loss: memref<f32>) attributes {memopt.train_step} {
  %h1 = memref.alloc() {memopt.memory = "host"} : memref<512x512xf32>
  memopt.kernel "memopt.transfer" ins(%a : memref<512x512xf32>) outs(%h1 : memref<512x512xf32>) with {to = #memopt<memory host>}
  %b = memref.alloc() : memref<512x512xf32>
  memopt.kernel "memopt.matmul" ins(%a, %a : memref<512x512xf32>, memref<512x512xf32>) outs(%b : memref<512x512xf32>) with {}
  %h2 = memref.alloc() {memopt.memory = "host"} : memref<512x512xf32>
  memopt.kernel "memopt.transfer" ins(%b : memref<512x512xf32>) outs(%h2 : memref<512x512xf32>) with {to = #memopt<memory host>}
  return
}

// -----

// A copy of a view rises no higher than the view: the start reads it.
// MOVED:      memopt.kernel "memopt.matmul"
// MOVED-NEXT: memref.reinterpret_cast
// MOVED-NEXT: memopt.kernel "memopt.transfer" ins(%reinterpret_cast : {{.*}} with {slot = 0 : i64, to = #memopt<memory host>}
// MOVED-NEXT: memopt.kernel "memopt.relu"
// MOVED-NEXT: memopt.transfer_wait %reinterpret_cast, %{{.*}} slot 0 :
func.func @train_step(%a: memref<512x512xf32>, %loss: memref<f32>) attributes {memopt.train_step} {
  %b = memref.alloc() : memref<512x512xf32>
  %h = memref.alloc() {memopt.memory = "host"} : memref<262144xf32>
  memopt.kernel "memopt.matmul" ins(%a, %a : memref<512x512xf32>, memref<512x512xf32>) outs(%b : memref<512x512xf32>) with {}
  %v = memref.reinterpret_cast %a to offset: [0], sizes: [262144], strides: [1] : memref<512x512xf32> to memref<262144xf32>
  memopt.kernel "memopt.transfer" ins(%v : memref<262144xf32>) outs(%h : memref<262144xf32>) with {to = #memopt<memory host>}
  memopt.kernel "memopt.relu" ins(%b : memref<512x512xf32>) outs(%b : memref<512x512xf32>) with {}
  return
}
