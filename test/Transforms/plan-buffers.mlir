// RUN: memopt-opt %s -split-input-file -memopt-plan-buffers | FileCheck %s
// RUN: memopt-opt %s -split-input-file -memopt-plan-buffers -memopt-verify-plan -o /dev/null
// RUN: memopt-opt %s -split-input-file -memopt-plan-buffers=alignment=1 | FileCheck %s --check-prefix=ALIGN1

// Three buffers with disjoint lifetimes share offset 0; each takes one
// 256-byte slot, so the arena is the lower bound.

// CHECK-LABEL: func.func @sequential
// CHECK-SAME:    memopt.arena_bytes = 256 : i64
// CHECK:         memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
// CHECK:         memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
// CHECK:         memref.alloc() {memopt.offset = 0 : i64} : memref<8xf32>
// ALIGN1-LABEL: func.func @sequential
// ALIGN1-SAME:    memopt.arena_bytes = 32 : i64
func.func @sequential(%x: memref<8xf32>, %out: memref<8xf32>) attributes {memopt.train_step} {
  %a = memref.alloc() : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%a : memref<8xf32>) with {}
  memopt.kernel "memopt.relu" ins(%a : memref<8xf32>) outs(%out : memref<8xf32>) with {}
  memref.dealloc %a : memref<8xf32>
  %b = memref.alloc() : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%b : memref<8xf32>) with {}
  memopt.kernel "memopt.relu" ins(%b : memref<8xf32>) outs(%out : memref<8xf32>) with {}
  memref.dealloc %b : memref<8xf32>
  %c = memref.alloc() : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%c : memref<8xf32>) with {}
  memopt.kernel "memopt.relu" ins(%c : memref<8xf32>) outs(%out : memref<8xf32>) with {}
  memref.dealloc %c : memref<8xf32>
  return
}

// -----

// Two buffers live together: the larger (400 bytes, 512 once aligned) at 0,
// the other right after it; the arena is 512 + 256, the lower bound. With
// alignment 1 they are packed back to back.

// CHECK-LABEL: func.func @overlapping
// CHECK-SAME:    memopt.arena_bytes = 768 : i64
// CHECK:         memref.alloc() {memopt.offset = 512 : i64} : memref<8xf32>
// CHECK:         memref.alloc() {memopt.offset = 0 : i64} : memref<100xf32>
// ALIGN1-LABEL: func.func @overlapping
// ALIGN1-SAME:    memopt.arena_bytes = 432 : i64
// ALIGN1:         memref.alloc() {memopt.offset = 400 : i64} : memref<8xf32>
// ALIGN1:         memref.alloc() {memopt.offset = 0 : i64} : memref<100xf32>
func.func @overlapping(%x: memref<8xf32>, %y: memref<100xf32>) attributes {memopt.train_step} {
  %a = memref.alloc() : memref<8xf32>
  %b = memref.alloc() : memref<100xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%a : memref<8xf32>) with {}
  memopt.kernel "memopt.relu" ins(%y : memref<100xf32>) outs(%b : memref<100xf32>) with {}
  memopt.kernel "memopt.add" ins(%a, %b : memref<8xf32>, memref<100xf32>) outs(%y : memref<100xf32>) with {}
  memref.dealloc %a : memref<8xf32>
  memref.dealloc %b : memref<100xf32>
  return
}

// -----

// The accumulator lives across the loop; the body's temporary and the buffer
// allocated after the loop both fit in the second slot.

// CHECK-LABEL: func.func @loop
// CHECK-SAME:    memopt.arena_bytes = 512 : i64
// CHECK:         %[[ACC:.*]] = memref.alloc() {memopt.offset = 0 : i64}
// CHECK:         scf.for
// CHECK:           memref.alloc() {memopt.offset = 256 : i64}
// CHECK:         memref.alloc() {memopt.offset = 256 : i64}
func.func @loop(%x: memref<8xf32>, %out: memref<8xf32>) attributes {memopt.train_step} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %acc = memref.alloc() : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%acc : memref<8xf32>) with {}
  scf.for %i = %c0 to %c4 step %c1 {
    %t = memref.alloc() : memref<8xf32>
    memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%t : memref<8xf32>) with {}
    memopt.kernel "memopt.add" ins(%acc, %t : memref<8xf32>, memref<8xf32>) outs(%acc : memref<8xf32>) with {}
    memref.dealloc %t : memref<8xf32>
  }
  %after = memref.alloc() : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%acc : memref<8xf32>) outs(%after : memref<8xf32>) with {}
  memref.dealloc %acc : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%after : memref<8xf32>) outs(%out : memref<8xf32>) with {}
  memref.dealloc %after : memref<8xf32>
  return
}

// -----

// No buffer: an empty arena. Functions not marked train_step are untouched.

// CHECK-LABEL: func.func @no_buffers
// CHECK-SAME:    memopt.arena_bytes = 0 : i64
// CHECK-LABEL: func.func @helper
// CHECK-NOT:     memopt.arena_bytes
// CHECK:         memref.alloc() : memref<8xf32>
func.func @no_buffers(%x: memref<8xf32>) attributes {memopt.train_step} {
  return
}
func.func @helper() {
  %a = memref.alloc() : memref<8xf32>
  memref.dealloc %a : memref<8xf32>
  return
}
