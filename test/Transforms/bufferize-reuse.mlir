// RUN: memopt-opt %s --memopt-bufferize -split-input-file | FileCheck %s
// RUN: memopt-opt %s --memopt-bufferize=reuse=false -split-input-file | FileCheck %s --check-prefix=OFF

// In-place elementwise: each result goes into the scratch buffer of an
// operand of its type that dies at its kernel. The input argument is never
// overwritten (the first kernel gets a buffer); the cast changes the element
// type, so it gets one too.

// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:[^:]*]]: memref<4xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.exp" ins(%[[X]] : memref<4xf32>) outs(%[[A]] : memref<4xf32>)
// CHECK-NEXT: memopt.kernel "memopt.relu" ins(%[[A]] : memref<4xf32>) outs(%[[A]] : memref<4xf32>)
// CHECK-NEXT: memopt.kernel "memopt.mul_scalar" ins(%[[A]] : memref<4xf32>) outs(%[[A]] : memref<4xf32>)
// CHECK-NEXT: %[[H:.*]] = memref.alloc() : memref<4xf16>
// CHECK-NEXT: memopt.kernel "memopt.cast" ins(%[[A]] : memref<4xf32>) outs(%[[H]] : memref<4xf16>)
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[H]] : memref<4xf16>) outs(%[[LOSS]] : memref<f32>)
// CHECK-NEXT: memref.dealloc %[[H]]
// CHECK-NEXT: return

// OFF-LABEL: func.func @chain
// OFF-COUNT-4: memref.alloc()
// OFF-NOT: memref.alloc()
// OFF: return
func.func @chain(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.train_step} {
  %a = memopt.exp %x : tensor<4xf32>
  %b = memopt.relu %a : tensor<4xf32>
  %c = memopt.mul_scalar %b, 2.0 : tensor<4xf32>
  %h = memopt.cast %c : tensor<4xf32> to tensor<4xf16>
  %l = memopt.reduce_sum %h dims [0] : tensor<4xf16> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// An operand read again later keeps its buffer: %a is read by the add, so the
// relu gets a buffer; at the add both operands die and the result takes the
// first one's buffer. A kernel that is not elementwise (the matmul) never
// overwrites an operand.

// CHECK-LABEL: func.func @still_live
// CHECK-SAME: (%[[X:[^:]*]]: memref<4x4xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[A:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT: memopt.kernel "memopt.exp" ins(%[[X]] : {{.*}}) outs(%[[A]] : {{.*}})
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT: memopt.kernel "memopt.relu" ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}})
// CHECK-NEXT: memopt.kernel "memopt.add" ins(%[[A]], %[[B]] : {{.*}}) outs(%[[A]] : {{.*}})
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: %[[M:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT: memopt.kernel "memopt.matmul" ins(%[[A]], %[[A]] : {{.*}}) outs(%[[M]] : {{.*}})
// CHECK-NEXT: memref.dealloc %[[A]]
func.func @still_live(%x: tensor<4x4xf32> {memopt.role = "input", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.train_step} {
  %a = memopt.exp %x : tensor<4x4xf32>
  %b = memopt.relu %a : tensor<4x4xf32>
  %c = memopt.add %a, %b : tensor<4x4xf32>
  %m = memopt.matmul %c, %c : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %l = memopt.reduce_sum %m dims [0, 1] : tensor<4x4xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// Where: the condition has another type; the dying true value's buffer is
// reused. Softmax may overwrite its input (runtime.h).

// CHECK-LABEL: func.func @where_softmax
// CHECK-SAME: (%[[C:[^:]*]]: memref<2x3xi1> {{.*}}, %[[X:[^:]*]]: memref<2x3xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[A:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK-NEXT: memopt.kernel "memopt.neg" ins(%[[X]] : {{.*}}) outs(%[[A]] : {{.*}})
// CHECK-NEXT: memopt.kernel "memopt.where" ins(%[[C]], %[[A]], %[[X]] : {{.*}}) outs(%[[A]] : {{.*}})
// CHECK-NEXT: memopt.kernel "memopt.softmax" ins(%[[A]] : {{.*}}) outs(%[[A]] : {{.*}}) with {dim = 1 : i64}
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[A]] : {{.*}}) outs(%[[LOSS]] : memref<f32>)
// CHECK-NEXT: memref.dealloc %[[A]]
func.func @where_softmax(%c: tensor<2x3xi1> {memopt.role = "input", memopt.name = "c"},
                         %x: tensor<2x3xf32> {memopt.role = "input", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.train_step} {
  %a = memopt.neg %x : tensor<2x3xf32>
  %w = memopt.where %c, %a, %x : tensor<2x3xi1>, tensor<2x3xf32>
  %s = memopt.softmax %w dim 1 : tensor<2x3xf32>
  %l = memopt.reduce_sum %s dims [0, 1] : tensor<2x3xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A value copied into an argument at the end of the step stays live to the
// end: the relu, its last reader in the body, does not overwrite it. (%a
// cannot go straight into %p because the mul reads the old %p after it.)

// CHECK-LABEL: func.func @returned
// CHECK-SAME: (%[[X:[^:]*]]: memref<4xf32> {{.*}}, %[[P:[^:]*]]: memref<4xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.exp" ins(%[[X]] : {{.*}}) outs(%[[A]] : {{.*}})
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.relu" ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}})
// CHECK-NEXT: memopt.kernel "memopt.mul" ins(%[[B]], %[[P]] : {{.*}}) outs(%[[B]] : {{.*}})
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[B]] : {{.*}}) outs(%[[LOSS]] : {{.*}})
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: memopt.kernel "memopt.reshape" ins(%[[A]] : {{.*}}) outs(%[[P]] : {{.*}})
// CHECK-NEXT: memref.dealloc %[[A]]
func.func @returned(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"},
                    %p: tensor<4xf32> {memopt.role = "param", memopt.name = "p"})
    -> (tensor<f32>, tensor<4xf32>) attributes {memopt.train_step} {
  %a = memopt.exp %x : tensor<4xf32>
  %b = memopt.relu %a : tensor<4xf32>
  %s = memopt.mul %b, %p : tensor<4xf32>
  %l = memopt.reduce_sum %s dims [0] : tensor<4xf32> to tensor<f32>
  return %l, %a : tensor<f32>, tensor<4xf32>
}

// -----

// Reshape aliasing: a reshape is a view of its operand's buffer, which lives
// until the last use of the view. The buffer of %a is still read through the
// view %r after the relu, so the relu gets its own buffer; the add is the
// last reader of both buffers and writes into the first. The reshape of the
// argument is the argument's own memory.

// CHECK-LABEL: func.func @views
// CHECK-SAME: (%[[X:[^:]*]]: memref<2x3xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[XV:.*]] = memref.reinterpret_cast %[[X]] to offset: [0], sizes: [6], strides: [1] : memref<2x3xf32> to memref<6xf32>
// CHECK-NEXT: %[[A:.*]] = memref.alloc() : memref<6xf32>
// CHECK-NEXT: memopt.kernel "memopt.exp" ins(%[[XV]] : memref<6xf32>) outs(%[[A]] : memref<6xf32>)
// CHECK-NEXT: %[[R:.*]] = memref.reinterpret_cast %[[A]] to offset: [0], sizes: [3, 2], strides: [2, 1] : memref<6xf32> to memref<3x2xf32>
// CHECK-NEXT: %[[B:.*]] = memref.alloc() : memref<6xf32>
// CHECK-NEXT: memopt.kernel "memopt.relu" ins(%[[A]] : {{.*}}) outs(%[[B]] : {{.*}})
// CHECK-NEXT: %[[RB:.*]] = memref.reinterpret_cast %[[B]] to offset: [0], sizes: [3, 2], strides: [2, 1] : memref<6xf32> to memref<3x2xf32>
// CHECK-NEXT: memopt.kernel "memopt.add" ins(%[[R]], %[[RB]] : {{.*}}) outs(%[[R]] : memref<3x2xf32>)
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[R]] : {{.*}}) outs(%[[LOSS]] : {{.*}})
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: return

// OFF-LABEL: func.func @views
// OFF-NOT: reinterpret_cast
// OFF-COUNT-3: memopt.kernel "memopt.reshape"
func.func @views(%x: tensor<2x3xf32> {memopt.role = "input", memopt.name = "x"})
    -> tensor<f32> attributes {memopt.train_step} {
  %xv = memopt.reshape %x : tensor<2x3xf32> to tensor<6xf32>
  %a = memopt.exp %xv : tensor<6xf32>
  %r = memopt.reshape %a : tensor<6xf32> to tensor<3x2xf32>
  %b = memopt.relu %a : tensor<6xf32>
  %rb = memopt.reshape %b : tensor<6xf32> to tensor<3x2xf32>
  %c = memopt.add %r, %rb : tensor<3x2xf32>
  %l = memopt.reduce_sum %c dims [0, 1] : tensor<3x2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A view of a parameter read after the kernel that computes the parameter's
// new value: that value may not overwrite the parameter, so it gets a buffer
// and is copied at the end. Without reuse the reshape copies the old value
// first and the update is in place.

// CHECK-LABEL: func.func @view_of_updated_param
// CHECK-SAME: (%[[P:[^:]*]]: memref<4xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[V:.*]] = memref.reinterpret_cast %[[P]]
// CHECK-NEXT: %[[P2:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: memopt.kernel "memopt.mul_scalar" ins(%[[P]] : {{.*}}) outs(%[[P2]] : {{.*}})
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[V]] : memref<2x2xf32>) outs(%[[LOSS]] : {{.*}})
// CHECK-NEXT: memopt.kernel "memopt.reshape" ins(%[[P2]] : memref<4xf32>) outs(%[[P]] : memref<4xf32>)

// OFF-LABEL: func.func @view_of_updated_param
// OFF-SAME: (%[[P:[^:]*]]: memref<4xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// OFF-NEXT: %[[V:.*]] = memref.alloc() : memref<2x2xf32>
// OFF-NEXT: memopt.kernel "memopt.reshape" ins(%[[P]] : memref<4xf32>) outs(%[[V]] : memref<2x2xf32>)
// OFF-NEXT: memopt.kernel "memopt.mul_scalar" ins(%[[P]] : {{.*}}) outs(%[[P]] : {{.*}})
func.func @view_of_updated_param(%p: tensor<4xf32> {memopt.role = "param", memopt.name = "p"})
    -> (tensor<f32>, tensor<4xf32>) attributes {memopt.train_step} {
  %v = memopt.reshape %p : tensor<4xf32> to tensor<2x2xf32>
  %p2 = memopt.mul_scalar %p, 2.0 : tensor<4xf32>
  %l = memopt.reduce_sum %v dims [0, 1] : tensor<2x2xf32> to tensor<f32>
  return %l, %p2 : tensor<f32>, tensor<4xf32>
}

// -----

// A reshape of an argument whose result is returned (here through a second
// reshape) stays a copy: the end-of-step copies run after the arguments are
// updated.

// CHECK-LABEL: func.func @returned_view_of_argument
// CHECK-SAME: (%[[X:[^:]*]]: memref<4xf32> {{.*}}, %[[P:[^:]*]]: memref<4xf32> {{.*}}, %[[LOSS:[^:]*]]: memref<f32> {{.*}})
// CHECK-NEXT: %[[R:.*]] = memref.alloc() : memref<2x2xf32>
// CHECK-NEXT: memopt.kernel "memopt.reshape" ins(%[[X]] : memref<4xf32>) outs(%[[R]] : memref<2x2xf32>)
// CHECK-NEXT: memopt.kernel "memopt.reshape" ins(%[[R]] : memref<2x2xf32>) outs(%[[P]] : memref<4xf32>)
// CHECK-NEXT: memref.dealloc %[[R]]
// CHECK-NEXT: memopt.kernel "memopt.reduce_sum" ins(%[[X]] : {{.*}}) outs(%[[LOSS]] : {{.*}})
// CHECK-NEXT: return
func.func @returned_view_of_argument(%x: tensor<4xf32> {memopt.role = "input", memopt.name = "x"},
                                     %p: tensor<4xf32> {memopt.role = "param", memopt.name = "p"})
    -> (tensor<f32>, tensor<4xf32>) attributes {memopt.train_step} {
  %r = memopt.reshape %x : tensor<4xf32> to tensor<2x2xf32>
  %r2 = memopt.reshape %r : tensor<2x2xf32> to tensor<4xf32>
  %l = memopt.reduce_sum %x dims [0] : tensor<4xf32> to tensor<f32>
  return %l, %r2 : tensor<f32>, tensor<4xf32>
}
