// RUN: memopt-opt %s -split-input-file -memopt-test-print-liveness -o /dev/null | FileCheck %s

// Straight-line code: a buffer lives from its alloc to the last kernel that
// reads or writes it; the dealloc does not count. The scope is the alloc's,
// or else its first user's.

// CHECK-LABEL: liveness of @straight (12 ops):
// CHECK-NEXT:  buffer 0 memref<4x3xf32> size=48 live=[0, 3] scope="fc1"
// CHECK-NEXT:  buffer 1 memref<4x3xf16> size=24 live=[2, 6] scope="act"
// CHECK-NEXT:  buffer 2 memref<4xi1> size=4 live=[5, 6] scope="mask"
// CHECK-NEXT:  buffer 3 memref<2xindex> size=16 live=[9, 10]{{$}}
// CHECK-NOT:   buffer
func.func @straight(%x: memref<4x8xf32>, %w: memref<3x8xf32>,
                    %loss: memref<4x3xf16>) attributes {memopt.train_step} {
  %h = memref.alloc() : memref<4x3xf32>
  memopt.kernel "memopt.matmul" ins(%x, %w : memref<4x8xf32>, memref<3x8xf32>) outs(%h : memref<4x3xf32>) with {transpose_rhs} {memopt.scope = "fc1"}
  %r = memref.alloc() {memopt.scope = "act"} : memref<4x3xf16>
  memopt.kernel "memopt.cast" ins(%h : memref<4x3xf32>) outs(%r : memref<4x3xf16>) with {}
  memref.dealloc %h : memref<4x3xf32>
  %m = memref.alloc() : memref<4xi1>
  memopt.kernel "memopt.relu" ins(%r : memref<4x3xf16>) outs(%loss, %m : memref<4x3xf16>, memref<4xi1>) with {} {memopt.scope = "mask"}
  memref.dealloc %m : memref<4xi1>
  memref.dealloc %r : memref<4x3xf16>
  // Never used: live from its alloc to its dealloc.
  %u = memref.alloc() : memref<2xindex>
  memref.dealloc %u : memref<2xindex>
  return
}

// -----

// A buffer used inside a loop it was allocated outside of is live over the
// whole loop (the next iteration reads it again); one allocated and freed in
// the body lives within the body. The loop op comes before its body.

// CHECK-LABEL: liveness of @loop (17 ops):
// CHECK-NEXT:  buffer 0 memref<8xf32> size=32 live=[3, 12]
// CHECK-NEXT:  buffer 1 memref<8xf32> size=32 live=[6, 8]
// CHECK-NEXT:  buffer 2 memref<8xf32> size=32 live=[11, 14]
func.func @loop(%x: memref<8xf32>, %out: memref<8xf32>) {
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

// Nested loops: a buffer last used in the inner loop lives to the end of the
// outermost loop it was not allocated in; one allocated in the outer body and
// used in the inner loop lives to the end of the inner loop.

// CHECK-LABEL: liveness of @nested (12 ops):
// CHECK-NEXT:  buffer 0 memref<16xf32> size=64 live=[2, 9]
// CHECK-NEXT:  buffer 1 memref<16xf32> size=64 live=[4, 7]
func.func @nested(%x: memref<16xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<16xf32>
  scf.for %i = %c0 to %n step %c1 {
    %b = memref.alloc() : memref<16xf32>
    scf.for %j = %c0 to %n step %c1 {
      memopt.kernel "memopt.add" ins(%x, %a : memref<16xf32>, memref<16xf32>) outs(%b : memref<16xf32>) with {}
    }
    memref.dealloc %b : memref<16xf32>
  }
  memref.dealloc %a : memref<16xf32>
  return
}

// -----

// Views alias their source: using one keeps the buffer live. Dynamic shapes
// have no size; a strided layout occupies its span.

// CHECK-LABEL: liveness of @aliases (9 ops):
// CHECK-NEXT:  buffer 0 memref<4x8xf32> size=128 live=[0, 3]
// CHECK-NEXT:  buffer 1 memref<?xf32> size=? live=[4, 5]
// CHECK-NEXT:  buffer 2 memref<4x4xf32, strided<[8, 1]>> size=112 live=[6, 7]
func.func @aliases(%x: memref<32xf32>, %out: memref<32xf32>, %n: index) {
  %a = memref.alloc() : memref<4x8xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<32xf32>) outs(%a : memref<4x8xf32>) with {}
  %v = memref.collapse_shape %a [[0, 1]] : memref<4x8xf32> into memref<32xf32>
  memopt.kernel "memopt.relu" ins(%v : memref<32xf32>) outs(%out : memref<32xf32>) with {}
  %d = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %d : memref<?xf32>
  %s = memref.alloc() : memref<4x4xf32, strided<[8, 1]>>
  memref.dealloc %s : memref<4x4xf32, strided<[8, 1]>>
  return
}

// -----

// The reshape views of --memopt-bufferize (reinterpret_cast, possibly of a
// view) keep their buffer live up to their last use.

// CHECK-LABEL: liveness of @reshape_views (8 ops):
// CHECK-NEXT:  buffer 0 memref<6xf32> size=24 live=[0, 5]
// CHECK-NEXT:  buffer 1 memref<f32> size=4 live=[6, 6]
func.func @reshape_views(%x: memref<6xf32>, %out: memref<3x2xf32>) {
  %a = memref.alloc() : memref<6xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<6xf32>) outs(%a : memref<6xf32>) with {}
  %v = memref.reinterpret_cast %a to offset: [0], sizes: [2, 3], strides: [3, 1] : memref<6xf32> to memref<2x3xf32>
  %w = memref.reinterpret_cast %v to offset: [0], sizes: [3, 2], strides: [2, 1] : memref<2x3xf32> to memref<3x2xf32>
  memref.dealloc %a : memref<6xf32>
  memopt.kernel "memopt.relu" ins(%w : memref<3x2xf32>) outs(%out : memref<3x2xf32>) with {}
  %b = memref.alloc() : memref<f32>
  return
}

// -----

// A buffer carried to the next iteration (iter_args) or out of the loop is
// live over the whole loop and up to its last use after it.

// CHECK-LABEL: liveness of @carried (10 ops):
// CHECK-NEXT:  buffer 0 memref<8xf32> size=32 live=[2, 8]
// CHECK-NEXT:  buffer 1 memref<8xf32> size=32 live=[3, 8]
func.func @carried(%x: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = memref.alloc() : memref<8xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%cur = %init) -> (memref<8xf32>) {
    memopt.kernel "memopt.relu" ins(%cur : memref<8xf32>) outs(%x : memref<8xf32>) with {}
    %next = memref.alloc() : memref<8xf32>
    memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%next : memref<8xf32>) with {}
    scf.yield %next : memref<8xf32>
  }
  memopt.kernel "memopt.relu" ins(%r : memref<8xf32>) outs(%x : memref<8xf32>) with {}
  return
}
