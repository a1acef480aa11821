// RUN: memopt-opt %s -split-input-file -memopt-plan-buffers=reuse=false | FileCheck %s
// RUN: memopt-opt %s -split-input-file -memopt-plan-buffers=reuse=false -memopt-verify-plan -o /dev/null
// RUN: memopt-opt %s -split-input-file "-memopt-plan-buffers=reuse=false alignment=1" | FileCheck %s --check-prefix=ALIGN1
// RUN: memopt-opt %s -split-input-file -memopt-plan-buffers | FileCheck %s --check-prefix=REUSE

// Buffers whose lifetimes never overlap, which the default plan puts at the
// same offset: without reuse each gets its own aligned slot, in program
// order, and the arena is the sum of the aligned sizes (40 -> 256,
// 400 -> 512, 32 -> 256, 1024 -> 1024: 2048 bytes), well above the lower
// bound (1024, the largest buffer, as no two live together).

// CHECK-LABEL: func.func @sequential
// CHECK-SAME:    memopt.arena_bytes = 2048 : i64
// CHECK:         memref.alloc() {memopt.offset = 0 : i64} : memref<10xf32>
// CHECK:         memref.alloc() {memopt.offset = 256 : i64} : memref<100xf32>
// CHECK:         memref.alloc() {memopt.offset = 768 : i64} : memref<8xf32>
// CHECK:         memref.alloc() {memopt.offset = 1024 : i64} : memref<256xf32>
// ALIGN1-LABEL: func.func @sequential
// ALIGN1-SAME:    memopt.arena_bytes = 1496 : i64
// ALIGN1:         memref.alloc() {memopt.offset = 0 : i64} : memref<10xf32>
// ALIGN1:         memref.alloc() {memopt.offset = 40 : i64} : memref<100xf32>
// ALIGN1:         memref.alloc() {memopt.offset = 440 : i64} : memref<8xf32>
// ALIGN1:         memref.alloc() {memopt.offset = 472 : i64} : memref<256xf32>
// REUSE-LABEL: func.func @sequential
// REUSE-SAME:    memopt.arena_bytes = 1024 : i64
// REUSE-COUNT-4: memref.alloc() {memopt.offset = 0 : i64}
func.func @sequential(%x: memref<10xf32>, %out: memref<10xf32>) attributes {memopt.train_step} {
  %a = memref.alloc() : memref<10xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<10xf32>) outs(%a : memref<10xf32>) with {}
  memopt.kernel "memopt.relu" ins(%a : memref<10xf32>) outs(%out : memref<10xf32>) with {}
  memref.dealloc %a : memref<10xf32>
  %b = memref.alloc() : memref<100xf32>
  memopt.kernel "memopt.relu" ins(%b : memref<100xf32>) outs(%b : memref<100xf32>) with {}
  memref.dealloc %b : memref<100xf32>
  %c = memref.alloc() : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%c : memref<8xf32>) outs(%c : memref<8xf32>) with {}
  memref.dealloc %c : memref<8xf32>
  %d = memref.alloc() : memref<256xf32>
  memopt.kernel "memopt.relu" ins(%d : memref<256xf32>) outs(%d : memref<256xf32>) with {}
  memref.dealloc %d : memref<256xf32>
  return
}

// -----

// Loops: the accumulator lives across the loop, the body's temporary one
// iteration, and the buffer allocated after the loop shares the body's slot
// in the default plan (arena 768, the lower bound); without reuse each has
// its own, in program order.

// CHECK-LABEL: func.func @loop
// CHECK-SAME:    memopt.arena_bytes = 1024 : i64
// CHECK:         memref.alloc() {memopt.offset = 0 : i64} : memref<100xf32>
// CHECK:         scf.for
// CHECK:           memref.alloc() {memopt.offset = 512 : i64} : memref<8xf32>
// CHECK:         memref.alloc() {memopt.offset = 768 : i64} : memref<8xf32>
// REUSE-LABEL: func.func @loop
// REUSE-SAME:    memopt.arena_bytes = 768 : i64
// REUSE:         memref.alloc() {memopt.offset = 0 : i64} : memref<100xf32>
// REUSE:         scf.for
// REUSE:           memref.alloc() {memopt.offset = [[SLOT:[0-9]+]] : i64} : memref<8xf32>
// REUSE:         memref.alloc() {memopt.offset = [[SLOT]] : i64} : memref<8xf32>
func.func @loop(%x: memref<8xf32>, %y: memref<100xf32>, %out: memref<8xf32>) attributes {memopt.train_step} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %acc = memref.alloc() : memref<100xf32>
  memopt.kernel "memopt.relu" ins(%y : memref<100xf32>) outs(%acc : memref<100xf32>) with {}
  scf.for %i = %c0 to %c4 step %c1 {
    %t = memref.alloc() : memref<8xf32>
    memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%t : memref<8xf32>) with {}
    memopt.kernel "memopt.add" ins(%acc, %t : memref<100xf32>, memref<8xf32>) outs(%acc : memref<100xf32>) with {}
    memref.dealloc %t : memref<8xf32>
  }
  %after = memref.alloc() : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%after : memref<8xf32>) with {}
  memopt.kernel "memopt.add" ins(%acc, %after : memref<100xf32>, memref<8xf32>) outs(%y : memref<100xf32>) with {}
  memref.dealloc %after : memref<8xf32>
  memref.dealloc %acc : memref<100xf32>
  return
}
